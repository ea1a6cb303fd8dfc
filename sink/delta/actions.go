package delta

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Action is one line of a Delta commit file: exactly one of the pointer
// fields is set. A line holding an unknown action name decodes to an Action
// with every field nil, which readers skip as the protocol requires; unknown
// fields inside known actions are ignored too.
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

// UnmarshalJSON keeps every field of the commitInfo in Raw and extracts the
// typed fields leniently: a field of an unexpected JSON type is left unset
// rather than failing the whole commit (commitInfo is free-form provenance).
func (c *CommitInfo) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*c = CommitInfo{Raw: raw}
	c.Timestamp = rawInt64(raw["timestamp"])
	c.InCommitTimestamp = rawInt64(raw["inCommitTimestamp"])
	var id string
	if json.Unmarshal(raw["txnId"], &id) == nil {
		c.TxnID = id
	}
	return nil
}

// MarshalJSON writes Raw with the typed fields laid over it, keys sorted
// except that inCommitTimestamp, when set, comes first (the protocol requires
// it to be the first field of the first action of an ICT commit).
func (c CommitInfo) MarshalJSON() ([]byte, error) {
	fields := make(map[string]json.RawMessage, len(c.Raw)+3)
	maps.Copy(fields, c.Raw)
	set := func(k string, v any) error {
		b, err := json.Marshal(v)
		fields[k] = b
		return err
	}
	if c.Timestamp != nil {
		if err := set("timestamp", *c.Timestamp); err != nil {
			return nil, err
		}
	}
	if c.InCommitTimestamp != nil {
		if err := set("inCommitTimestamp", *c.InCommitTimestamp); err != nil {
			return nil, err
		}
	}
	if c.TxnID != "" {
		if err := set("txnId", c.TxnID); err != nil {
			return nil, err
		}
	}
	keys := slices.Sorted(maps.Keys(fields))
	if i := slices.Index(keys, "inCommitTimestamp"); i > 0 {
		keys = append([]string{"inCommitTimestamp"}, slices.Delete(keys, i, i+1)...)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		if err := json.Compact(&buf, fields[k]); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Operation returns commitInfo.operation, or "" when absent or not a string.
func (c *CommitInfo) Operation() string {
	if c == nil {
		return ""
	}
	var op string
	_ = json.Unmarshal(c.Raw["operation"], &op)
	return op
}

// rawInt64 decodes an exact JSON integer; anything else gives nil.
func rawInt64(raw json.RawMessage) *int64 {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var n json.Number
	if dec.Decode(&n) != nil || strings.ContainsAny(n.String(), ".eE") {
		return nil
	}
	v, err := n.Int64()
	if err != nil {
		return nil
	}
	return &v
}
