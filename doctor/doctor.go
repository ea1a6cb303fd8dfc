package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
)

// Options name the database, the store and the relay's objects, as `relay
// run` is given them.
type Options struct {
	Source      string // DSN of the relay's role (deltabus_relay)
	Store       string // file:///path or s3://bucket/prefix
	Slot        string // default "deltabus"
	Publication string // default "deltabus"
	AppID       string // the relay's --app-id, if set (default: the source's)
	Mappings    outbox.Mappings
	S3          storage.S3Options
	// PII is the relay's personal data settings (--pii-schemas, --kek,
	// --keys); with a schema directory, the KEK and the key table are
	// checked too.
	PII pii.Config
	// MaxClockSkew is how far this host's clock may be from the
	// database's (default 1 s).
	MaxClockSkew time.Duration
	// Timeout bounds each check (default 15 s).
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Slot == "" {
		o.Slot = "deltabus"
	}
	if o.Publication == "" {
		o.Publication = "deltabus"
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	return o
}

// Status is a check's outcome.
type Status string

// The outcomes of a check.
const (
	OK      Status = "ok"
	Fail    Status = "fail"
	Skipped Status = "skipped" // could not run: another check failed
)

// Result is one check. Detail says what was found (ok), what is wrong and
// how to fix it (fail), or which failed check it waits for (skipped).
type Result struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Report is every check, in the order they ran. OK is true when every
// check holds.
type Report struct {
	OK     bool     `json:"ok"`
	Checks []Result `json:"checks"`
}

func (r *Report) add(check string, status Status, format string, args ...any) {
	detail := pgsource.Redact(oneLine(fmt.Sprintf(format, args...)))
	r.Checks = append(r.Checks, Result{Check: check, Status: status, Detail: detail})
}

func (r *Report) ok(check, format string, args ...any) { r.add(check, OK, format, args...) }

// fail records a failed check; an error holding several (errors.Join)
// gives one result per line.
func (r *Report) fail(check string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			r.add(check, Fail, "%s", line)
		}
	}
}

func (r *Report) skip(check, format string, args ...any) { r.add(check, Skipped, format, args...) }

// oneLine joins a message's lines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// Run runs every check and returns the report: the database's, then the
// store's, then the slot's, which needs both.
func Run(ctx context.Context, o Options) Report {
	o = o.withDefaults()
	var r Report
	conn := connect(ctx, o, &r)
	if conn != nil {
		defer conn.Close(context.WithoutCancel(ctx))
	}
	d := &database{o: o, conn: conn, r: &r}
	d.run(ctx)
	store := openStore(ctx, o, &r)
	if store != nil {
		checkStore(ctx, o, store, &r)
	} else {
		r.skip("store_writable", "not checked: the store could not be opened (see the store check)")
		r.skip("conditional_write", "not checked: the store could not be opened (see the store check)")
	}
	checkGroups(ctx, o, store, &r)
	checkPersonal(ctx, o, store, &r)
	d.each(ctx, "slot", func(ctx context.Context) error { return d.slot(ctx, store) })
	r.OK = true
	for _, c := range r.Checks {
		r.OK = r.OK && c.Status == OK
	}
	return r
}

// connect opens the relay role's SQL connection, or records why not.
func connect(ctx context.Context, o Options, r *Report) *pgx.Conn {
	if o.Source == "" {
		r.add("database", Fail, "no source database: set DELTABUS_SOURCE or --source to the relay role's DSN (postgres://deltabus_relay@host:5432/db; the password in PGPASSWORD or a pgpass file)")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := pgsource.Connect(cctx, o.Source)
	if err != nil {
		r.fail("database", err)
		return nil
	}
	var version, user string
	if err := conn.QueryRow(cctx, "SELECT current_setting('server_version'), current_user").Scan(&version, &user); err != nil {
		r.add("database", Fail, "connected to %s but cannot query it: %s", pgsource.Describe(o.Source), pgsource.RootCause(err))
		conn.Close(context.WithoutCancel(ctx))
		return nil
	}
	r.ok("database", "connected to %s as %s (PostgreSQL %s)", pgsource.Describe(o.Source), user, version)
	if err := migrations.CheckServerVersion(cctx, conn); err != nil {
		r.fail("server_version", err)
	} else {
		r.ok("server_version", "PostgreSQL %s: supported (%d or later)", strings.Fields(version)[0], migrations.MinMajor)
	}
	return conn
}

// Print writes one line per check: "ok   check: detail", "FAIL check:
// what is wrong and how to fix it", "skip check: why", then a summary.
func (r Report) Print(w io.Writer) {
	failed := 0
	for _, c := range r.Checks {
		tag := map[Status]string{OK: "ok  ", Fail: "FAIL", Skipped: "skip"}[c.Status]
		fmt.Fprintf(w, "%s %s: %s\n", tag, c.Check, c.Detail)
		if c.Status == Fail {
			failed++
		}
	}
	if r.OK {
		fmt.Fprintf(w, "all %d checks hold: `relay run` can start\n", len(r.Checks))
	} else {
		fmt.Fprintf(w, "%d of %d checks failed\n", failed, len(r.Checks))
	}
}

// PrintJSON writes the report as indented JSON.
func (r Report) PrintJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
