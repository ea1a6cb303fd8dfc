package deploy

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeFaninAddsASource: compose/fanin.yml only adds services,
// volumes and nothing else (docker-compose.yml's services are exactly as
// without it); its PostgreSQL is a second cluster with its own data volume
// and port, the same image as the first.
func TestComposeFaninAddsASource(t *testing.T) {
	main := loadComposeFiles(t, []string{composeFile}, nil, "ops")
	fanin := loadComposeFiles(t, []string{composeFile, faninFile}, nil, "ops")
	for name, s := range main.Services {
		if !reflect.DeepEqual(fanin.Services[name], s) {
			t.Errorf("%s changes the service %s of %s", faninFile, name, composeFile)
		}
	}
	for name, v := range main.Volumes {
		if !reflect.DeepEqual(fanin.Volumes[name], v) {
			t.Errorf("%s changes the volume %s", faninFile, name)
		}
	}
	if !reflect.DeepEqual(fanin.Secrets, main.Secrets) {
		t.Errorf("%s changes the secrets: %v; want %v", faninFile, fanin.Secrets, main.Secrets)
	}
	pg, pgB := service(t, fanin, mainSource.postgres), service(t, fanin, billingSource.postgres)
	if pgB.Image != pg.Image {
		t.Errorf("%s image %q; want %s's %q", pgB.Name, pgB.Image, pg.Name, pg.Image)
	}
	if a, b := volumeAt(t, pg, "/var/lib/postgresql/data").Source, volumeAt(t, pgB, "/var/lib/postgresql/data").Source; a == b {
		t.Errorf("%s and %s share the data volume %s", pg.Name, pgB.Name, a)
	}
	if a, b := publishedPorts(pg), publishedPorts(pgB); len(b) == 0 || slices.ContainsFunc(b, func(p string) bool { return slices.Contains(a, p) }) {
		t.Errorf("%s publishes %v, %s %v; want distinct host ports", pg.Name, a, pgB.Name, b)
	}
	for _, s := range [...]types.ServiceConfig{pg, pgB} {
		for _, p := range s.Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("%s port %+v published beyond 127.0.0.1", s.Name, p)
			}
		}
	}
}

func publishedPorts(s types.ServiceConfig) []string {
	var out []string
	for _, p := range s.Ports {
		out = append(out, p.Published)
	}
	return out
}

// TestComposeFaninOneStoreTwoSources: the two relays (and the two
// reconciles) write to the same store through the same S3 settings, read
// different databases on different clusters, and keep the default source
// identity: no app id and no slot or publication of their own, so each one
// commits under deltabus-<its system identifier>-deltabus.
func TestComposeFaninOneStoreTwoSources(t *testing.T) {
	p := loadComposeFiles(t, []string{composeFile, faninFile}, nil, "ops")
	for _, name := range []string{"relay", "reconcile"} {
		a, b := service(t, p, mainSource.svc(name)), service(t, p, billingSource.svc(name))
		for _, k := range []string{"DELTABUS_STORE", "DELTABUS_S3_ENDPOINT", "DELTABUS_S3_PATH_STYLE", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if envOf(t, a, k) != envOf(t, b, k) {
				t.Errorf("%s and %s: %s differs; want one store", a.Name, b.Name, k)
			}
		}
	}
	seen := map[string]string{}
	for _, src := range []composeSource{mainSource, billingSource} {
		relay := service(t, p, src.svc("relay"))
		dsn, err := url.Parse(envOf(t, relay, "DELTABUS_SOURCE"))
		if err != nil {
			t.Fatal(err)
		}
		db := dsn.Host + dsn.Path
		if other, dup := seen[db]; dup {
			t.Errorf("%s and %s both read %s; want two source databases", other, relay.Name, db)
		}
		seen[db] = relay.Name
	}
	for _, s := range p.Services {
		if s.Image != relayImage {
			continue
		}
		for _, k := range []string{"DELTABUS_APP_ID", "DELTABUS_SLOT", "DELTABUS_PUBLICATION"} {
			if _, set := s.Environment[k]; set {
				t.Errorf("%s sets %s; the example runs on the default source identity", s.Name, k)
			}
		}
		for _, a := range s.Command {
			if f, _, _ := strings.Cut(a, "="); f == "--app-id" || f == "--slot" || f == "--publication" {
				t.Errorf("%s: %s on its command line; the example runs on the default source identity", s.Name, a)
			}
		}
	}
}
