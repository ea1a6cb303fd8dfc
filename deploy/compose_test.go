package deploy

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const composeFile = "../docker-compose.yml"

// faninFile adds a second source database to composeFile (used with -f).
const faninFile = "compose/fanin.yml"

// relayImage is the image the compose file builds from the Dockerfile.
const relayImage = "deltabus/relay:dev"

// The role each relay-image service logs in as.
var composeRoles = map[string]string{
	"migrate":   "deltabus_migrate",
	"relay":     "deltabus_relay",
	"reconcile": "deltabus_reconcile",
	"janitor":   "deltabus_janitor",
}

// composeSource is one source database of a compose project: its
// PostgreSQL service and the suffix of the relay-image services serving it
// (migrate, relay, reconcile, janitor).
type composeSource struct{ postgres, suffix string }

func (s composeSource) svc(name string) string { return name + s.suffix }

var (
	mainSource    = composeSource{postgres: "postgres"}
	billingSource = composeSource{postgres: "postgres-billing", suffix: "-billing"}
)

// composeSetup is a list of compose files, as given with -f, and the
// sources they define.
type composeSetup struct {
	name    string
	files   []string
	sources []composeSource
}

var composeSetups = []composeSetup{
	{"main", []string{composeFile}, []composeSource{mainSource}},
	{"fanin", []string{composeFile, faninFile}, []composeSource{mainSource, billingSource}},
}

// forEachSetup runs f as a subtest for every compose setup.
func forEachSetup(t *testing.T, f func(t *testing.T, cs composeSetup)) {
	for _, cs := range composeSetups {
		t.Run(cs.name, func(t *testing.T) { f(t, cs) })
	}
}

// loadCompose loads docker-compose.yml with the Compose specification's
// loader (schema validation, interpolation, merge keys, consistency), with
// env as the only environment and the given profiles active.
func loadCompose(t *testing.T, env []string, profiles ...string) *types.Project {
	t.Helper()
	return loadComposeFiles(t, []string{composeFile}, env, profiles...)
}

// loadComposeFiles is loadCompose for files merged in order (docker
// compose -f A -f B), paths resolved against the repository root (the first
// file's directory).
func loadComposeFiles(t *testing.T, files []string, env []string, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory(".."),
		cli.WithEnv(env),
		cli.WithProfiles(profiles),
		cli.WithInterpolation(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load %v: %v", files, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("compose: no service %q (active: %v)", name, p.ServiceNames())
	}
	return s
}

func envOf(t *testing.T, s types.ServiceConfig, key string) string {
	t.Helper()
	v, ok := s.Environment[key]
	if !ok || v == nil {
		t.Fatalf("compose service %s: no %s in its environment", s.Name, key)
	}
	return *v
}

// TestComposeProfiles: the daemon stack starts by default, the operations
// services only with the ops profile; fanin.yml adds its source's daemons
// by default and its operations under the same profile.
func TestComposeProfiles(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		want := []string{"s3"}
		var ops []string
		for _, src := range cs.sources {
			want = append(want, src.postgres, src.svc("migrate"), src.svc("relay"))
			ops = append(ops, src.svc("reconcile"), src.svc("janitor"))
		}
		p := loadComposeFiles(t, cs.files, nil)
		if got := sortedCopy(p.ServiceNames()); !slices.Equal(got, sortedCopy(want)) {
			t.Fatalf("default services %v; want %v", got, sortedCopy(want))
		}
		withOps := loadComposeFiles(t, cs.files, nil, "ops")
		for _, name := range ops {
			if s := service(t, withOps, name); !slices.Equal(s.Profiles, []string{"ops"}) {
				t.Fatalf("%s: profiles %v; want [ops]", name, s.Profiles)
			}
		}
	})
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestComposePostgres: the health check uses TCP (the init-time server
// listens on the socket only), data lives in a named volume, and the roles
// are created by the init script from the mounted roles.sql, in every
// source's PostgreSQL.
func TestComposePostgres(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		p := loadComposeFiles(t, cs.files, nil)
		for _, src := range cs.sources {
			checkComposePostgres(t, p, service(t, p, src.postgres))
		}
	})
}

func checkComposePostgres(t *testing.T, p *types.Project, pg types.ServiceConfig) {
	t.Helper()
	hc := pg.HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "pg_isready" || !hasArgPair(hc.Test, "-h", "127.0.0.1") ||
		!hasArgPair(hc.Test, "-d", envOf(t, pg, "POSTGRES_DB")) {
		t.Fatalf("%s healthcheck %v; want [CMD pg_isready -h 127.0.0.1 ... -d POSTGRES_DB]", pg.Name, hc)
	}
	if !slices.Contains(pg.Command, "wal_level=logical") {
		t.Fatalf("%s command %v: want -c wal_level=logical", pg.Name, pg.Command)
	}
	data := volumeAt(t, pg, "/var/lib/postgresql/data")
	if data.Type != types.VolumeTypeVolume || p.Volumes[data.Source].Name == "" {
		t.Fatalf("%s data: %+v; want a named volume declared under volumes:", pg.Name, data)
	}
	script := volumeAt(t, pg, "/docker-entrypoint-initdb.d/10-deltabus-roles.sh")
	roles := volumeAt(t, pg, "/deltabus/roles.sql")
	for _, v := range []types.ServiceVolumeConfig{script, roles} {
		if v.Type != types.VolumeTypeBind || !v.ReadOnly || !isRegularFile(v.Source) {
			t.Fatalf("%s mount %+v: want a read-only bind of a file in the repository", pg.Name, v)
		}
	}
	if !samePath(roles.Source, "sql/roles.sql") || !samePath(script.Source, "compose/initdb/10-deltabus-roles.sh") {
		t.Fatalf("%s mounts %s and %s; want deploy/sql/roles.sql and deploy/compose/initdb/10-deltabus-roles.sh", pg.Name, roles.Source, script.Source)
	}
	initScript := readFile(t, "compose/initdb/10-deltabus-roles.sh")
	if !strings.Contains(initScript, "DELTABUS_ROLES_SQL:-"+roles.Target) || !strings.Contains(initScript, "DELTABUS_SECRETS_DIR:-/run/secrets") {
		t.Fatalf("the init script does not default to %s and /run/secrets", roles.Target)
	}
	// The init script reads every role's pgpass secret.
	for svc, role := range composeRoles {
		secret := strings.TrimPrefix(role, "deltabus_") + "_pgpass"
		if !hasSecret(pg, secret) || !strings.Contains(initScript, "$secrets/"+secret+"\" "+role) {
			t.Fatalf("%s: secret %s (the %s service's) is not mounted or not read by the init script for %s", pg.Name, secret, svc, role)
		}
	}
	if envOf(t, pg, "POSTGRES_PASSWORD_FILE") != "/run/secrets/postgres_password" || !hasSecret(pg, "postgres_password") {
		t.Fatalf("%s: the superuser password must come from the postgres_password secret file", pg.Name)
	}
	if _, ok := pg.Environment["POSTGRES_PASSWORD"]; ok {
		t.Fatalf("%s: POSTGRES_PASSWORD in the environment; use POSTGRES_PASSWORD_FILE", pg.Name)
	}
}

func hasArgPair(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

func volumeAt(t *testing.T, s types.ServiceConfig, target string) types.ServiceVolumeConfig {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v
		}
	}
	t.Fatalf("service %s: nothing mounted at %s", s.Name, target)
	return types.ServiceVolumeConfig{}
}

func hasSecret(s types.ServiceConfig, name string) bool {
	for _, sec := range s.Secrets {
		if sec.Source == name {
			return true
		}
	}
	return false
}

func isRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// samePath reports whether abs names the file rel (relative to deploy/).
func samePath(abs, rel string) bool {
	r, err := filepath.Abs(rel)
	return err == nil && filepath.Clean(abs) == r
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestComposeRelayServices: every service running the relay image logs in
// as its own role, not the superuser, to its own source's database, with no
// password in its DSN; the password comes from its pgpass secret through
// PGPASSFILE; the container is read-only and writes nothing to the host.
func TestComposeRelayServices(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		p := loadComposeFiles(t, cs.files, nil, "ops")
		for _, src := range cs.sources {
			checkComposeRelayServices(t, p, src)
		}
	})
}

func checkComposeRelayServices(t *testing.T, p *types.Project, src composeSource) {
	t.Helper()
	pg := service(t, p, src.postgres)
	superuser := envOf(t, pg, "POSTGRES_USER")
	for base, role := range composeRoles {
		name := src.svc(base)
		s := service(t, p, name)
		if s.Image != relayImage || s.Build == nil || !s.ReadOnly {
			t.Errorf("%s: image %q, build %v, read_only %v; want %s built here, read-only", name, s.Image, s.Build != nil, s.ReadOnly, relayImage)
		}
		dsn, err := url.Parse(envOf(t, s, "DELTABUS_SOURCE"))
		if err != nil {
			t.Fatalf("%s: DELTABUS_SOURCE: %v", name, err)
		}
		if _, has := dsn.User.Password(); has || dsn.Query().Has("password") {
			t.Errorf("%s: password in DELTABUS_SOURCE", name)
		}
		if user := dsn.User.Username(); user != role || user == superuser || user == "postgres" {
			t.Errorf("%s: connects as %q; want %s", name, user, role)
		}
		if dsn.Host != src.postgres+":5432" || dsn.Path != "/"+envOf(t, pg, "POSTGRES_DB") {
			t.Errorf("%s: DSN host/db %s%s; want %s:5432 and its POSTGRES_DB", name, dsn.Host, dsn.Path, src.postgres)
		}
		secret := strings.TrimPrefix(role, "deltabus_") + "_pgpass"
		if envOf(t, s, "PGPASSFILE") != "/run/secrets/"+secret || !hasSecret(s, secret) {
			t.Errorf("%s: PGPASSFILE %q, secrets %v; want /run/secrets/%s", name, envOf(t, s, "PGPASSFILE"), s.Secrets, secret)
		}
		if got := pgpassUser(t, p.Secrets[secret].File); got != role {
			t.Errorf("%s: secret %s is for %q; want %s", name, secret, got, role)
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				t.Errorf("%s: bind mount %s -> %s; the relay writes to the S3 service, not the host", name, v.Source, v.Target)
			}
		}
	}
	if deps := service(t, p, src.svc("migrate")).DependsOn; deps[src.postgres].Condition != types.ServiceConditionHealthy {
		t.Errorf("%s depends_on %v; want %s service_healthy", src.svc("migrate"), deps, src.postgres)
	}
	relay := service(t, p, src.svc("relay"))
	if relay.DependsOn[src.svc("migrate")].Condition != types.ServiceConditionCompletedSuccessfully ||
		relay.DependsOn["s3"].Condition != types.ServiceConditionHealthy {
		t.Errorf("%s depends_on %v; want %s service_completed_successfully and s3 service_healthy", relay.Name, relay.DependsOn, src.svc("migrate"))
	}
	if relay.Restart != types.RestartPolicyUnlessStopped || relay.StopSignal != "SIGTERM" {
		t.Errorf("%s: restart %q, stop_signal %q", relay.Name, relay.Restart, relay.StopSignal)
	}
	for _, name := range []string{src.svc("reconcile"), src.svc("janitor")} {
		if deps := service(t, p, name).DependsOn; deps[relay.Name].Condition != types.ServiceConditionStarted {
			t.Errorf("%s depends_on %v; want %s service_started", name, deps, relay.Name)
		}
	}
}

// pgpassUser returns the user field of a one-line pgpass file.
func pgpassUser(t *testing.T, path string) string {
	t.Helper()
	f := strings.SplitN(strings.TrimSpace(readFile(t, path)), ":", 5)
	if len(f) != 5 {
		t.Fatalf("%s: want host:port:db:user:password", path)
	}
	return f[3]
}

// TestComposeRelayHealth: each relay listens for /metrics and /readyz
// where `relay healthcheck` (which reads the same DELTABUS_METRICS_ADDR and
// asks a wildcard address on loopback) and the published port reach it;
// the relays publish on distinct host ports, on 127.0.0.1 only.
func TestComposeRelayHealth(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		p := loadComposeFiles(t, cs.files, nil)
		hostPorts := map[string]string{}
		for _, src := range cs.sources {
			relay := service(t, p, src.svc("relay"))
			hostPort := checkComposeRelayHealth(t, relay)
			if other, dup := hostPorts[hostPort]; dup {
				t.Errorf("%s and %s both publish their metrics on host port %s", other, relay.Name, hostPort)
			}
			hostPorts[hostPort] = relay.Name
		}
	})
}

// checkComposeRelayHealth checks one relay service and returns the host
// port its metrics are published on.
func checkComposeRelayHealth(t *testing.T, relay types.ServiceConfig) string {
	t.Helper()
	if hc := relay.HealthCheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/relay", "healthcheck"}) || hc.StartPeriod == nil {
		t.Fatalf("%s healthcheck %+v; want [CMD /relay healthcheck] with a start_period", relay.Name, hc)
	}
	if slices.Contains(relay.Command, "--metrics-addr") {
		t.Fatalf("%s: --metrics-addr on the command line; set DELTABUS_METRICS_ADDR, which the healthcheck reads too", relay.Name)
	}
	host, port, err := net.SplitHostPort(envOf(t, relay, "DELTABUS_METRICS_ADDR"))
	if err != nil || (host != "" && host != "0.0.0.0") {
		t.Fatalf("%s DELTABUS_METRICS_ADDR host %q (%v); want 0.0.0.0 so the published port reaches it", relay.Name, host, err)
	}
	published := ""
	for _, pc := range relay.Ports {
		if pc.HostIP != "127.0.0.1" {
			t.Errorf("%s port %+v published beyond 127.0.0.1 (it serves /debug/pprof too)", relay.Name, pc)
		}
		if portString(pc.Target) == port {
			published = pc.Published
		}
	}
	if published == "" {
		t.Errorf("%s: metrics port %s not published", relay.Name, port)
	}
	return published
}

func portString(p uint32) string { return strconv.FormatUint(uint64(p), 10) }

// TestComposeS3Store: the relay's store is a bucket the S3 service creates,
// reached by its service name with path-style addressing and the same
// credentials as the server's root account, which stay in sync when
// overridden.
func TestComposeS3Store(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		for _, env := range [][]string{nil, {"DELTABUS_S3_ACCESS_KEY=ak-override", "DELTABUS_S3_SECRET_KEY=sk-override"}} {
			checkComposeS3Store(t, cs, env)
		}
	})
}

func checkComposeS3Store(t *testing.T, cs composeSetup, env []string) {
	t.Helper()
	p := loadComposeFiles(t, cs.files, env, "ops")
	s3 := service(t, p, "s3")
	if !strings.HasPrefix(s3.Image, "versity/versitygw:v") {
		t.Fatalf("s3 image %q; want a pinned versity/versitygw:vX.Y.Z", s3.Image)
	}
	if s3.HealthCheck == nil || len(s3.HealthCheck.Test) == 0 {
		t.Fatal("s3: no healthcheck")
	}
	data := volumeAt(t, s3, "/data")
	if data.Type != types.VolumeTypeVolume {
		t.Fatalf("s3 data %+v; want a named volume", data)
	}
	var clients []string
	for _, src := range cs.sources {
		clients = append(clients, src.svc("relay"), src.svc("reconcile"))
	}
	for _, name := range clients {
		s := service(t, p, name)
		store, err := url.Parse(envOf(t, s, "DELTABUS_STORE"))
		if err != nil || store.Scheme != "s3" {
			t.Fatalf("%s: DELTABUS_STORE %q; want s3://bucket/prefix", name, envOf(t, s, "DELTABUS_STORE"))
		}
		if !strings.Contains(strings.Join(s3.Entrypoint, " "), "mkdir -p /data/"+store.Host+" ") {
			t.Errorf("%s: bucket %q is not created by the s3 service's entrypoint %v", name, store.Host, s3.Entrypoint)
		}
		ep, err := url.Parse(envOf(t, s, "DELTABUS_S3_ENDPOINT"))
		if err != nil || ep.Hostname() != "s3" || ":"+ep.Port() != envOf(t, s3, "VGW_PORT") {
			t.Errorf("%s: DELTABUS_S3_ENDPOINT %q; want http://s3:<VGW_PORT>", name, envOf(t, s, "DELTABUS_S3_ENDPOINT"))
		}
		if envOf(t, s, "DELTABUS_S3_PATH_STYLE") != "true" {
			t.Errorf("%s: DELTABUS_S3_PATH_STYLE must be true for versitygw", name)
		}
		for client, server := range map[string]string{
			"AWS_ACCESS_KEY_ID": "ROOT_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "ROOT_SECRET_ACCESS_KEY", "AWS_REGION": "VGW_REGION"} {
			if envOf(t, s, client) != envOf(t, s3, server) {
				t.Errorf("%s: %s %q differs from the s3 service's %s %q", name, client, envOf(t, s, client), server, envOf(t, s3, server))
			}
		}
	}
	if env != nil && envOf(t, s3, "ROOT_SECRET_ACCESS_KEY") != "sk-override" {
		t.Fatal("DELTABUS_S3_SECRET_KEY does not override the S3 secret")
	}
}

// TestComposeNoSecretInArgs: no password, secret key or DSN with a
// password appears in any command, entrypoint or health check, and every
// secret file exists.
func TestComposeNoSecretInArgs(t *testing.T) {
	forEachSetup(t, func(t *testing.T, cs composeSetup) {
		checkComposeNoSecretInArgs(t, loadComposeFiles(t, cs.files, nil, "ops"))
	})
}

func checkComposeNoSecretInArgs(t *testing.T, p *types.Project) {
	t.Helper()
	var secrets []string
	for name, sec := range p.Secrets {
		if !isRegularFile(sec.File) {
			t.Fatalf("secret %s: file %s missing", name, sec.File)
		}
		value := strings.TrimSpace(readFile(t, sec.File))
		if strings.HasSuffix(name, "_pgpass") {
			value = pgpassPassword(t, sec.File)
		}
		secrets = append(secrets, value)
	}
	secrets = append(secrets, envOf(t, service(t, p, "s3"), "ROOT_SECRET_ACCESS_KEY"))
	for _, s := range p.Services {
		args := append(append([]string{}, s.Command...), s.Entrypoint...)
		if s.HealthCheck != nil {
			args = append(args, s.HealthCheck.Test...)
		}
		for _, a := range args {
			for _, secret := range secrets {
				if strings.Contains(a, secret) {
					t.Errorf("service %s: a secret appears in its arguments (%q)", s.Name, a)
				}
			}
			lower := strings.ToLower(a)
			if strings.Contains(lower, "password") || strings.Contains(lower, "secret") || strings.Contains(lower, "postgres://") {
				t.Errorf("service %s: argument %q names a credential or a DSN", s.Name, a)
			}
		}
	}
}
