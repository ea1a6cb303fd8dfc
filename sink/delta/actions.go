package delta

import "encoding/json"

// Action is one line of a Delta commit file: exactly one of the pointer
// fields is set. Unknown action names are kept in Unknown so a reader can
// ignore them as the protocol requires.
type Action struct {
	Protocol   *Protocol       `json:"protocol,omitempty"`
	Metadata   *Metadata       `json:"metaData,omitempty"`
	Add        *Add            `json:"add,omitempty"`
	Remove     *Remove         `json:"remove,omitempty"`
	Txn        *Txn            `json:"txn,omitempty"`
	CommitInfo *CommitInfo     `json:"commitInfo,omitempty"`
	CDC        *CDC            `json:"cdc,omitempty"`
	Domain     *DomainMetadata `json:"domainMetadata,omitempty"`
}

// Protocol is the "protocol" action.
type Protocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format is metaData.format.
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the "metaData" action. SchemaString is JSON text inside a
// JSON string, as the protocol requires; Configuration values are strings.
type Metadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// Add is the "add" action. Path is the URI-encoded relative path as it
// appears in the log; Stats is a JSON-encoded string, not an object.
type Add struct {
	Path                    string             `json:"path"`
	PartitionValues         map[string]*string `json:"partitionValues"`
	Size                    int64              `json:"size"`
	ModificationTime        int64              `json:"modificationTime"`
	DataChange              bool               `json:"dataChange"`
	Stats                   string             `json:"stats,omitempty"`
	Tags                    map[string]string  `json:"tags,omitempty"`
	DeletionVector          json.RawMessage    `json:"deletionVector,omitempty"`
	BaseRowID               *int64             `json:"baseRowId,omitempty"`
	DefaultRowCommitVersion *int64             `json:"defaultRowCommitVersion,omitempty"`
}

// Remove is the "remove" action.
type Remove struct {
	Path                 string             `json:"path"`
	DeletionTimestamp    *int64             `json:"deletionTimestamp,omitempty"`
	DataChange           bool               `json:"dataChange"`
	ExtendedFileMetadata *bool              `json:"extendedFileMetadata,omitempty"`
	PartitionValues      map[string]*string `json:"partitionValues,omitempty"`
	Size                 *int64             `json:"size,omitempty"`
	Stats                string             `json:"stats,omitempty"`
	Tags                 map[string]string  `json:"tags,omitempty"`
	DeletionVector       json.RawMessage    `json:"deletionVector,omitempty"`
}

// Txn is the "txn" (SetTransaction) action: application progress recorded
// in the same commit as the data, the basis of exactly-once writes.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// CDC is the "cdc" (AddCDCFile) action.
type CDC struct {
	Path            string             `json:"path"`
	PartitionValues map[string]*string `json:"partitionValues"`
	Size            int64              `json:"size"`
	DataChange      bool               `json:"dataChange"`
	Tags            map[string]string  `json:"tags,omitempty"`
}

// DomainMetadata is the "domainMetadata" action.
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// CommitInfo is free-form provenance. Readers parse it leniently: Raw keeps
// every field; the typed fields are the ones we use.
type CommitInfo struct {
	Timestamp         *int64                     `json:"-"`
	InCommitTimestamp *int64                     `json:"-"`
	TxnID             string                     `json:"-"`
	Raw               map[string]json.RawMessage `json:"-"`
}
