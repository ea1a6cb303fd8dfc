package pii

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii/classify"
	"github.com/deltabus/deltabus/pii/keys"
	"github.com/deltabus/deltabus/storage"
)

// EraseRequest is one `relay erase`.
type EraseRequest struct {
	Subject string // the subject's id, as the payload holds it
	Topic   string // only this topic's key; "" = every topic
	// Source is the source database: the slot whose progress erasure
	// waits for, and the outbox whose rows of the subject it deletes.
	Source   string
	Slot     string
	Outbox   string           // "schema.table"; default public.outbox
	Mapping  outbox.Mapping   // its columns
	Wait     time.Duration    // how long to wait for the relay (0: do not wait)
	Store    storage.Store    // the store's root
	Keys     *keys.Store      // opened with the KEK, writable
	Schemas  *classify.Static // the subject pointers, for the outbox rows
	Progress func(string)     // progress lines (nil: none)
}

// EraseReport says what Erase did.
type EraseReport struct {
	Subject       string           // the subject hash
	Topics        []string         // topics whose key was deleted
	Unreadable    map[string]int64 // per topic, stored events holding envelopes of the subject
	OutboxDeleted int64            // rows of the subject deleted from the outbox
	OutboxError   string           // why rows could not be deleted (they stay until the janitor's retention)
	RecordVersion int64            // version of the _erasures record
	WaitedFor     pglogrepl.LSN    // the WAL position the relay had acknowledged before the keys went (short of the target when --wait ran out)
}

// Erase erases a data subject: it waits until the relay has acknowledged
// everything written before the request (so the count covers the
// subject's events in flight), deletes the subject's keys and records the
// erasure beside them (keys.Store.Delete), deletes its rows still in the
// outbox, appends an erasure record to _erasures and counts the stored
// events it made unreadable (by the subject hash in their envelopes,
// never decrypting).
//
// That no event of the subject written before the erasure is encrypted
// later under a new key does not rest on the wait: the recorded erasure
// stops every relay (of this source or another sharing the topics, a
// bootstrap --recover, a rebuild) from creating a key for such an event,
// whose personal fields are then written redacted (keys.Store.SealKey).
// The wait is the slot's only, and bounded: past --wait it erases all
// the same, and says so.
func Erase(ctx context.Context, req EraseRequest) (EraseReport, error) {
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	rep := EraseReport{Unreadable: map[string]int64{}}
	sub, err := req.Keys.SubjectHash([]byte(req.Subject))
	if err != nil {
		return rep, err
	}
	rep.Subject = sub.String()
	conn, err := pgsource.Connect(ctx, req.Source)
	if err != nil {
		return rep, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if req.Wait > 0 {
		if rep.WaitedFor, err = waitForRelay(ctx, conn, req.Slot, req.Wait, progress); err != nil {
			return rep, err
		}
	}
	if rep.Topics, err = req.Keys.Delete(ctx, sub, req.Topic); err != nil {
		return rep, err
	}
	progress(fmt.Sprintf("deleted %d keys of subject %s", len(rep.Topics), rep.Subject))
	rep.OutboxDeleted, err = deleteOutboxRows(ctx, conn, req)
	if err != nil {
		rep.OutboxError = err.Error()
	}
	for _, t := range rep.Topics {
		n, _, err := CountSubject(ctx, req.Store, t, sub)
		if err != nil {
			return rep, fmt.Errorf("the keys are deleted; counting the events of topic %q failed: %w", t, err)
		}
		rep.Unreadable[t] = n
	}
	var total int64
	for _, n := range rep.Unreadable {
		total += n
	}
	if rep.RecordVersion, err = RecordErasure(ctx, req.Store, Erasure{Subject: rep.Subject, Topics: rep.Topics, Events: total,
		At: time.Now().UTC()}); err != nil {
		return rep, fmt.Errorf("the keys are deleted; the erasure record (consumers drop cached keys at it, else at their cache TTL) failed: %w", err)
	}
	return rep, nil
}

// waitForRelay waits until the slot has confirmed the WAL position of now:
// the insert position, past every commit record any session has made
// (pg_current_wal_lsn, the write position, can be behind a commit an
// asynchronous-commit session already made visible).
func waitForRelay(ctx context.Context, conn *pgx.Conn, slot string, wait time.Duration, progress func(string)) (pglogrepl.LSN, error) {
	var target string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	want, _ := pglogrepl.ParseLSN(target)
	deadline := time.Now().Add(wait)
	for said := false; ; said = true {
		var confirmed *string
		err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&confirmed)
		if errors.Is(err, pgx.ErrNoRows) {
			progress(fmt.Sprintf("no slot %q: nothing is being relayed from here, erasing now (events of the subject relayed later are written with its personal fields redacted)", slot))
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read slot %q: %w", slot, err)
		}
		var at pglogrepl.LSN
		if confirmed != nil {
			at, _ = pglogrepl.ParseLSN(*confirmed)
		}
		if at >= want {
			return at, nil
		}
		if time.Now().After(deadline) {
			progress(fmt.Sprintf("the relay (slot %s) has not acknowledged WAL up to %s within %s (it is at %s; relay status shows why it lags): erasing now; "+
				"the subject's events it relays later are written with their personal fields redacted, and are not in the counts below", slot, want, wait, at))
			return at, nil
		}
		if !said {
			progress(fmt.Sprintf("waiting for the relay (slot %s) to acknowledge WAL up to %s", slot, want))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deleteOutboxRows deletes the subject's rows still in the outbox, for
// every classified (topic, type, version) (of req.Topic, when set).
func deleteOutboxRows(ctx context.Context, conn *pgx.Conn, req EraseRequest) (int64, error) {
	if req.Schemas == nil {
		return 0, errors.New("no contracts (neither the store's registry nor --pii-schemas): the subject pointers of the outbox rows are unknown")
	}
	table := req.Outbox
	if table == "" {
		table = outbox.DefaultTable
	}
	m := req.Mapping
	if m.IsZero() {
		m = outbox.DeltaBusMapping()
	}
	ident := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	var tbl pgx.Identifier = strings.SplitN(table, ".", 2)
	var total int64
	for _, c := range req.Schemas.Contracts() {
		if req.Topic != "" && c.Topic != req.Topic || !c.HasPersonal() {
			continue
		}
		q := fmt.Sprintf("DELETE FROM %s WHERE %s = $1 AND %s = $2 AND (%s)::jsonb #>> $3 = $4", tbl.Sanitize(),
			ident(m.Topic), ident(m.Type), ident(m.Payload))
		args := []any{c.Topic, c.Type, c.Subject, req.Subject}
		if m.SchemaVersion != "" {
			q += fmt.Sprintf(" AND COALESCE(%s, 1) = $5", ident(m.SchemaVersion))
			args = append(args, c.Version)
		}
		tag, err := conn.Exec(ctx, q, args...)
		if err != nil {
			return total, fmt.Errorf("delete the subject's rows of topic %q type %q from %s: %s; they stay until the janitor deletes them (relay janitor --retention)",
				c.Topic, c.Type, table, pgsource.RootCause(err))
		}
		total += tag.RowsAffected()
	}
	return total, nil
}

// Summary renders the report for people, one fact a line.
func (r EraseReport) Summary() []string {
	var lines []string
	if len(r.Topics) == 0 {
		return []string{fmt.Sprintf("subject %s had no key: nothing stored was readable for it (already erased, or never seen)", r.Subject)}
	}
	topics := slices.Clone(r.Topics)
	slices.Sort(topics)
	lines = append(lines, fmt.Sprintf("erased subject %s: deleted its keys of %d topics (%s)", r.Subject, len(topics), strings.Join(topics, ", ")))
	for _, t := range topics {
		lines = append(lines, fmt.Sprintf("topic %s: %d stored events made unreadable (they stay, with their personal fields unreadable to every reader)", t, r.Unreadable[t]))
	}
	if r.OutboxError != "" {
		lines = append(lines, "outbox: "+r.OutboxError)
	} else {
		lines = append(lines, fmt.Sprintf("outbox: %d rows of the subject deleted", r.OutboxDeleted))
	}
	lines = append(lines, fmt.Sprintf("recorded in %s at version %d: consumers drop its cached keys", ErasuresTopic, r.RecordVersion))
	return lines
}
