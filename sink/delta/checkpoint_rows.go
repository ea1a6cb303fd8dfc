package delta

import (
	"maps"
	"slices"

	"github.com/deltabus/deltabus/parquetpage"
)

// Top-level columns of checkpointSchema, in order.
const (
	cpTxn = iota
	cpAdd
	cpRemove
	cpMetaData
	cpProtocol
	cpDomain
)

// fileRowsPerGroup is the number of add or remove rows per row group.
const fileRowsPerGroup = 64 << 10

// fileRowsPerChunk is how many rows are shredded between two yields of
// the checkpointer's goroutine: a background checkpoint of a large table
// takes milliseconds of CPU, and with one P (the relay's default on two
// cores) the writer's commit, woken from an fsync, and the stream's next
// message would otherwise wait for the scheduler's 10 ms preemption
// (package coop). parquetpage yields between pages. A row, its stats
// unpacked, takes 5-10 µs on a busy two-core machine: 128 rows keep a
// chunk near a millisecond (1,024 held the stream for up to 11 ms).
const fileRowsPerChunk = 128

// The leaves each row kind writes (cpLeaf: the leaf's dotted path).
var (
	txnAppID, txnVersion, txnUpdated = cpLeaf("txn.appId"), cpLeaf("txn.version"), cpLeaf("txn.lastUpdated")

	addPath, addPVKey, addPVValue = cpLeaf("add.path"), cpLeaf("add.partitionValues.key_value.key"), cpLeaf("add.partitionValues.key_value.value")
	addSize, addModTime, addData  = cpLeaf("add.size"), cpLeaf("add.modificationTime"), cpLeaf("add.dataChange")
	addTagKey, addTagValue        = cpLeaf("add.tags.key_value.key"), cpLeaf("add.tags.key_value.value")
	addDV, addBaseRow, addRCV     = cpLeaf("add.deletionVector.storageType"), cpLeaf("add.baseRowId"), cpLeaf("add.defaultRowCommitVersion")
	addStats                      = cpLeaf("add.stats")

	rmPath, rmDeleted, rmData, rmExtended = cpLeaf("remove.path"), cpLeaf("remove.deletionTimestamp"), cpLeaf("remove.dataChange"), cpLeaf("remove.extendedFileMetadata")
	rmPVKey, rmPVValue, rmSize            = cpLeaf("remove.partitionValues.key_value.key"), cpLeaf("remove.partitionValues.key_value.value"), cpLeaf("remove.size")
	rmDV, rmBaseRow, rmRCV                = cpLeaf("remove.deletionVector.storageType"), cpLeaf("remove.baseRowId"), cpLeaf("remove.defaultRowCommitVersion")

	mdID, mdName, mdDesc          = cpLeaf("metaData.id"), cpLeaf("metaData.name"), cpLeaf("metaData.description")
	mdProvider                    = cpLeaf("metaData.format.provider")
	mdOptKey, mdOptValue          = cpLeaf("metaData.format.options.key_value.key"), cpLeaf("metaData.format.options.key_value.value")
	mdSchema, mdPartCols          = cpLeaf("metaData.schemaString"), cpLeaf("metaData.partitionColumns.list.element")
	mdConfKey, mdConfValue, mdCTs = cpLeaf("metaData.configuration.key_value.key"), cpLeaf("metaData.configuration.key_value.value"), cpLeaf("metaData.createdTime")

	pReader, pWriter       = cpLeaf("protocol.minReaderVersion"), cpLeaf("protocol.minWriterVersion")
	pReaderFeat, pWriterFe = cpLeaf("protocol.readerFeatures.list.element"), cpLeaf("protocol.writerFeatures.list.element")

	dmDomain, dmConf, dmRemoved = cpLeaf("domainMetadata.domain"), cpLeaf("domainMetadata.configuration"), cpLeaf("domainMetadata.removed")
)

// stateRows shreds the checkpoint rows of snap other than files:
// protocol, metaData, txns by app id, domains by name.
func (s *cpShred) stateRows(snap *Snapshot) {
	p, m := snap.Protocol, snap.Metadata
	s.row(cpProtocol)
	s.i32(pReader, p.MinReaderVersion)
	s.i32(pWriter, p.MinWriterVersion)
	s.list(pReaderFeat, p.ReaderFeatures, p.ReaderFeatures == nil)
	s.list(pWriterFe, p.WriterFeatures, p.WriterFeatures == nil)

	s.row(cpMetaData)
	s.str(mdID, m.ID, 0)
	s.optStr(mdName, m.Name)
	s.optStr(mdDesc, m.Description)
	s.str(mdProvider, m.Format.Provider, 0)
	s.plainMap(mdOptKey, mdOptValue, m.Format.Options, false)
	s.str(mdSchema, m.SchemaString, 0)
	s.list(mdPartCols, m.PartitionColumns, false)
	s.plainMap(mdConfKey, mdConfValue, m.Configuration, false)
	opt(s, mdCTs, m.CreatedTime, s.i64)

	for _, id := range slices.Sorted(maps.Keys(snap.Txns)) {
		t := snap.Txns[id]
		s.row(cpTxn)
		s.str(txnAppID, t.AppID, 0)
		s.i64(txnVersion, t.Version)
		opt(s, txnUpdated, t.LastUpdated, s.i64)
	}
	for _, name := range slices.Sorted(maps.Keys(snap.Domains)) {
		d := snap.Domains[name]
		s.row(cpDomain)
		s.str(dmDomain, d.Domain, 0)
		s.str(dmConf, d.Configuration, 0)
		s.boolean(dmRemoved, d.Removed)
	}
}

// addRow shreds one add (dataChange false, as checkpoints hold it) whose
// statistics are stats (unpacked).
func (s *cpShred) addRow(a *Add, stats string) {
	s.row(cpAdd)
	s.str(addPath, a.Path, 0)
	s.strMap(addPVKey, addPVValue, a.PartitionValues, a.PartitionValues == nil)
	s.i64(addSize, a.Size)
	s.i64(addModTime, a.ModificationTime)
	s.boolean(addData, false)
	s.plainMap(addTagKey, addTagValue, a.Tags, a.Tags == nil)
	s.deletionVector(addDV, a.DeletionVector)
	opt(s, addBaseRow, a.BaseRowID, s.i64)
	opt(s, addRCV, a.DefaultRowCommitVersion, s.i64)
	if stats == "" {
		s.optStr(addStats, nil)
	} else {
		s.str(addStats, stats, 0)
	}
}

// removeRow shreds one tombstone (no stats or tags: checkpoints keep
// tombstones for VACUUM only; dataChange false).
func (s *cpShred) removeRow(r *Remove) {
	s.row(cpRemove)
	s.str(rmPath, r.Path, 0)
	opt(s, rmDeleted, r.DeletionTimestamp, s.i64)
	s.boolean(rmData, false)
	opt(s, rmExtended, r.ExtendedFileMetadata, s.boolean)
	s.strMap(rmPVKey, rmPVValue, r.PartitionValues, r.PartitionValues == nil)
	opt(s, rmSize, r.Size, s.i64)
	s.deletionVector(rmDV, r.DeletionVector)
	opt(s, rmBaseRow, (*int64)(nil), s.i64)
	opt(s, rmRCV, (*int64)(nil), s.i64)
}

// writeFileRows writes n file actions (adds, or removes) as their own row
// groups of at most fileRowsPerGroup rows, shredded by row(s, i). head,
// when not nil, shreds rows at the start of the first row group (the
// protocol, metaData and txn rows go with the first adds, so a reader of
// a small checkpoint decodes one row group). Tombstones thus sit in row
// groups of their own, which readers that do not need them skip (see
// rowGroupsWithout). It returns the number of rows written, head's too.
func writeFileRows(f *parquetpage.File, s *cpShred, head func(*cpShred), n int, row func(*cpShred, int)) (int, error) {
	written := 0
	for start := 0; start < n || head != nil; start += fileRowsPerGroup {
		s.reset(min(n-start, fileRowsPerGroup) + 8)
		if head != nil {
			head(s)
			head = nil
		}
		for i, end := start, min(start+fileRowsPerGroup, n); i < end; i++ {
			row(s, i)
			if (i+1)%fileRowsPerChunk == 0 {
				f.Yield()
			}
		}
		if err := f.WriteLeaves(s.rows, s.leaves); err != nil {
			return written, err
		}
		written += s.rows
	}
	return written, nil
}
