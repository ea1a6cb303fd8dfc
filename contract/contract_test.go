package contract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"unsafe"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/usererr"
)

const (
	orderV1 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number"}}}`
	orderV2 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number"},"note":{"type":"string"}}}`
)

// countingStore is the real local store, counting the requests a test
// wants to bound.
type countingStore struct {
	storage.Store
	lists, gets atomic.Int64
}

func (s *countingStore) List(ctx context.Context, prefix, after string) ([]storage.Object, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, prefix, after)
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

func newStore(t *testing.T) *countingStore { return newStoreB(t) }

func newStoreB(t testing.TB) *countingStore {
	t.Helper()
	s, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &countingStore{Store: s}
}

func register(t *testing.T, r *Registry, topic, typ string, v int32, schema string) Outcome {
	t.Helper()
	out, err := r.Register(context.Background(), Registration{Topic: topic, Type: typ, Version: v, Schema: []byte(schema), Mode: compat.None})
	if err != nil {
		t.Fatalf("register %s/%s v%d: %v", topic, typ, v, err)
	}
	return out
}

// TestRegisterIsImmutableAndContiguous: a version is written once, equal
// schemas (formatting aside) are a no-op, a different schema for a taken
// version and a gap are refused, and nothing is written by a refusal.
func TestRegisterIsImmutableAndContiguous(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	r := NewRegistry(st, nil)
	if out := register(t, r, "orders", "OrderPlaced", 1, orderV1); !out.New || out.Mode != compat.None || out.PrevMode != "" {
		t.Fatalf("first registration: %+v", out)
	}
	if out := register(t, r, "orders", "OrderPlaced", 1, orderV1); out.New {
		t.Fatalf("identical bytes registered again: %+v", out)
	}
	if out := register(t, r, "orders", "OrderPlaced", 1, " {\n \"required\": [\"order_id\"], \"type\":\"object\", \"properties\":{\"amount\":{\"type\":\"number\"},\"order_id\":{\"type\":\"integer\"}}}"); out.New {
		t.Fatalf("the same schema reformatted registered again: %+v", out)
	}
	before, _ := st.Store.List(ctx, catalog.Prefix, "")
	for _, c := range []struct {
		reg  Registration
		want string
	}{
		{Registration{Topic: "orders", Type: "OrderPlaced", Version: 1, Schema: []byte(orderV2)}, "already registered with a different schema"},
		{Registration{Topic: "orders", Type: "OrderPlaced", Version: 3, Schema: []byte(orderV2)}, "would leave a gap: the latest registered is 1; register version 2"},
		{Registration{Topic: "orders", Type: "Other", Version: 2, Schema: []byte(orderV2)}, "latest registered is 0; register version 1"},
		{Registration{Topic: "_dead_letter", Type: "X", Version: 1, Schema: []byte(orderV1)}, "reserved"},
		{Registration{Topic: "Orders", Type: "X", Version: 1, Schema: []byte(orderV1)}, "uppercase"},
		{Registration{Topic: "orders", Type: "X", Version: 0, Schema: []byte(orderV1)}, "positive"},
		{Registration{Topic: "orders", Type: "X", Version: -3, Schema: []byte(orderV1)}, "positive"},
		{Registration{Topic: "orders", Type: "", Version: 1, Schema: []byte(orderV1)}, "event type is empty"},
		{Registration{Topic: "orders", Type: "X", Version: 1, Schema: []byte(`{"type":`)}, "not JSON"},
		{Registration{Topic: "orders", Type: "X", Version: 1, Schema: []byte(`{"type":"objet"}`)}, "not a valid JSON Schema"},
		{Registration{Topic: "orders", Type: "X", Version: 1, Schema: []byte(`[1]`)}, "a JSON array"},
		{Registration{Topic: "orders", Type: "X", Version: 1, Schema: []byte(`{"$ref":"https://example.com/s.json"}`)}, "self-contained"},
	} {
		_, err := r.Register(ctx, c.reg)
		if err == nil || !usererr.Is(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("register %+v: %v; want a one-line user error containing %q", c.reg.Version, err, c.want)
		}
	}
	after, _ := st.Store.List(ctx, catalog.Prefix, "")
	if len(after) != len(before) {
		t.Fatalf("refused registrations wrote objects: %d -> %d", len(before), len(after))
	}
	out := register(t, r, "orders", "OrderPlaced", 2, orderV2)
	if !out.New || len(out.ComparedWith) != 1 || out.ComparedWith[0] != 1 {
		t.Fatalf("v2: %+v", out)
	}
	subs, err := r.Subjects(ctx, "")
	if err != nil || len(subs) != 1 || subs[0].Latest() != 2 || subs[0].Mode != compat.None || !subs[0].ModeSet {
		t.Fatalf("subjects: %+v %v", subs, err)
	}
	// Stored naming the draft it is read in, every other byte as given.
	if b, err := r.Schema(ctx, "orders", "OrderPlaced", 0); err != nil || string(b) != `{"$schema":"http://json-schema.org/draft-07/schema#",`+orderV2[1:] {
		t.Fatalf("latest schema: %s %v", b, err)
	}
}

// TestConcurrentRegistrationsOneWins: processes registering the same
// version with different schemas at once: exactly one schema lands and
// every other registration is refused; equal schemas all succeed.
func TestConcurrentRegistrationsOneWins(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := NewRegistry(st, nil) // one registry per "process"
			schema := fmt.Sprintf(`{"type":"object","title":"writer %d"}`, i)
			_, errs[i] = r.Register(ctx, Registration{Topic: "orders", Type: "Placed", Version: 1, Schema: []byte(schema), Mode: compat.None})
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both registered version 1", won, i)
		case err == nil:
			won = i
		case !strings.Contains(err.Error(), "different schema"):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	b, err := NewRegistry(st, nil).Schema(ctx, "orders", "Placed", 1)
	if err != nil || won < 0 || string(b) != fmt.Sprintf(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","title":"writer %d"}`, won) {
		t.Fatalf("stored %s (%v), winner %d", b, err, won)
	}
}

func TestPolicy(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newStore(t), nil)
	if p, err := r.Policy(ctx, "orders"); err != nil || p != (Policy{}) {
		t.Fatalf("default policy %+v %v", p, err)
	}
	if err := r.SetPolicy(ctx, "orders", Policy{OnViolation: Hold, Strict: true}); err != nil {
		t.Fatal(err)
	}
	if p, err := r.Policy(ctx, "orders"); err != nil || !p.Holds() || !p.Strict {
		t.Fatalf("policy %+v %v", p, err)
	}
	for _, bad := range []struct {
		topic string
		p     Policy
	}{{"orders", Policy{OnViolation: "drop"}}, {"_dead_letter", Policy{}}} {
		if err := r.SetPolicy(ctx, bad.topic, bad.p); err == nil || !usererr.Is(err) {
			t.Errorf("SetPolicy(%s, %+v) = %v", bad.topic, bad.p, err)
		}
	}
}

// TestCacheChecksEvents: valid, invalid, unregistered version, types
// without contracts in plain and strict topics.
func TestCacheChecksEvents(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	r := NewRegistry(st, nil)
	register(t, r, "orders", "OrderPlaced", 1, orderV1)
	if err := r.SetPolicy(ctx, "strict", Policy{Strict: true}); err != nil {
		t.Fatal(err)
	}
	c := New(st, Options{})
	for _, e := range []struct {
		topic, typ string
		version    int32
		payload    string
		want       Problem // "" passes
		ptr        string
	}{
		{"orders", "OrderPlaced", 1, `{"order_id": 7, "amount": 1.5}`, "", ""},
		{"orders", "OrderPlaced", 1, `{"order_id": "7"}`, Invalid, "/order_id"},
		{"orders", "OrderPlaced", 1, `{"amount": 1}`, Invalid, "/order_id"},
		{"orders", "OrderPlaced", 2, `{"order_id": 7}`, Unregistered, ""},
		{"orders", "Other", 1, `"anything"`, "", ""},
		{"payments", "OrderPlaced", 1, `{}`, "", ""},
		{"strict", "Anything", 1, `{}`, NoContract, ""},
	} {
		v, err := c.Check(ctx, e.topic, e.typ, e.version, []byte(e.payload))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.want == "" && v != nil:
			t.Errorf("%s/%s v%d %s refused: %v", e.topic, e.typ, e.version, e.payload, v)
		case e.want != "" && (v == nil || v.Problem != e.want || v.Pointer != e.ptr):
			t.Errorf("%s/%s v%d %s: %+v; want %s at %q", e.topic, e.typ, e.version, e.payload, v, e.want, e.ptr)
		}
	}
	v, _ := c.Check(ctx, "orders", "OrderPlaced", 1, []byte(`{"order_id": "7"}`))
	if msg := v.Error(); msg != `event violates contract orders/OrderPlaced v1 at "/order_id": type: got string, want integer` {
		t.Errorf("message %q", msg)
	}
}

// TestCacheSeesNewVersionsBoundedly: a version registered after the cache
// loaded is found by the first event naming it (one List of its type), and
// a flood of events naming unregistered versions or types costs at most one
// List per registered type or strict topic per Refresh, never a read per
// row.
func TestCacheSeesNewVersionsBoundedly(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	r := NewRegistry(st, nil)
	register(t, r, "orders", "OrderPlaced", 1, orderV1)
	if err := r.SetPolicy(ctx, "strict", Policy{Strict: true}); err != nil {
		t.Fatal(err)
	}
	c := New(st, Options{Poll: -1})
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	gen := c.Generation()
	register(t, r, "orders", "OrderPlaced", 2, orderV2)
	if v, err := c.Check(ctx, "orders", "OrderPlaced", 2, []byte(`{"order_id": 1, "note": "x"}`)); v != nil || err != nil {
		t.Fatalf("v2 right after its registration: %v %v", v, err)
	}
	if c.Generation() == gen {
		t.Fatal("the cache's generation did not move with a new version")
	}
	lists, gets := st.lists.Load(), st.gets.Load()
	for i := range 10_000 {
		if v, err := c.Check(ctx, "orders", "OrderPlaced", int32(3+i), []byte(`{}`)); err != nil || v == nil || v.Problem != Unregistered {
			t.Fatalf("version %d: %v %v", 3+i, v, err)
		}
		if v, err := c.Check(ctx, "strict", fmt.Sprintf("T%d", i), 1, []byte(`{}`)); err != nil || v == nil || v.Problem != NoContract {
			t.Fatalf("strict type %d: %v %v", i, v, err)
		}
		if v, err := c.Check(ctx, "orders", fmt.Sprintf("T%d", i), 1, []byte(`{}`)); err != nil || v != nil {
			t.Fatalf("plain type %d: %v %v", i, v, err)
		}
	}
	if dl, dg := st.lists.Load()-lists, st.gets.Load()-gets; dl > 4 || dg > 2 {
		t.Fatalf("30,000 hostile events cost %d lists and %d gets", dl, dg)
	}
}

func TestCacheSchemasAreBounded(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	r := NewRegistry(st, nil)
	for v := int32(1); v <= 5; v++ {
		register(t, r, "orders", "T", v, fmt.Sprintf(`{"type":"object","title":"v%d"}`, v))
	}
	c := New(st, Options{MaxSchemas: 2})
	for round := 0; round < 3; round++ {
		for v := int32(1); v <= 5; v++ {
			if res, err := c.Check(ctx, "orders", "T", v, []byte(`{}`)); res != nil || err != nil {
				t.Fatal(res, err)
			}
			if len(c.schemas) > 2 {
				t.Fatalf("%d compiled schemas kept", len(c.schemas))
			}
		}
	}
}

// TestCacheRefusesATamperedContract: an object no registration wrote
// fails loudly, naming the key, instead of passing or refusing events.
func TestCacheRefusesATamperedContract(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	key, _ := catalog.Key(catalog.KindContract, "orders", "T", "1")
	if err := st.Put(ctx, key, []byte(`{"type": 12}`)); err != nil {
		t.Fatal(err)
	}
	_, err := New(st, Options{}).Check(ctx, "orders", "T", 1, []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "orders/T v1") || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("tampered contract: %v", err)
	}
}

func TestFromDir(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{
		"orders/OrderPlaced/1.json":  {Data: []byte(orderV1)},
		"orders/OrderPlaced/v2.json": {Data: []byte(orderV2)},
		"orders/policy.json":         {Data: []byte(`{"strict": true}`)},
		"orders/README.md":           {Data: []byte("ignored")},
	}
	c, err := FromDir(fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Check(ctx, "orders", "OrderPlaced", 2, []byte(`{"order_id": 1, "note": 3}`)); err != nil || v == nil || v.Pointer != "/note" {
		t.Fatalf("v2 from the directory: %v %v", v, err)
	}
	if v, _ := c.Check(ctx, "orders", "Unknown", 1, []byte(`{}`)); v == nil || v.Problem != NoContract {
		t.Fatalf("strict topic from the directory's policy: %v", v)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"bad version": {"orders/T/one.json": {Data: []byte(orderV1)}},
		"bad schema":  {"orders/T/1.json": {Data: []byte(`{"type":1}`)}},
		"bad layout":  {"orders/1.json": {Data: []byte(orderV1)}},
		"reserved":    {"_dead_letter/T/1.json": {Data: []byte(orderV1)}},
		"twice":       {"orders/T/1.json": {Data: []byte(orderV1)}, "orders/T/v1.json": {Data: []byte(orderV1)}},
	} {
		if _, err := FromDir(fsys, Options{}); err == nil || !usererr.Is(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestIncompatibleErrorListsDifferences(t *testing.T) {
	e := &IncompatibleError{Topic: "orders", Type: "T", Version: 2, Mode: compat.Backward,
		Differences: []compat.Difference{{Pointer: "/required", Rule: "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", Old: "[]", New: `["x"]`}}}
	var ie *IncompatibleError
	if !errors.As(error(e), &ie) || !strings.Contains(e.Error(), "/required") {
		t.Fatal(e.Error())
	}
}

// TestCheckKeepsNoAlias: the relay passes the type as a view of its
// receive buffer, reused for the next message: nothing the cache keeps or
// returns may point into it.
func TestCheckKeepsNoAlias(t *testing.T) {
	ctx, st := context.Background(), newStore(t)
	register(t, NewRegistry(st, nil), "orders", "OrderPlaced", 1, orderV1)
	c := New(st, Options{})
	buf := []byte("OrderPlaced")
	view := unsafe.String(unsafe.SliceData(buf), len(buf))
	v1, _ := c.Check(ctx, "orders", view, 1, []byte(`{}`))
	v2, _ := c.Check(ctx, "orders", view, 2, []byte(`{}`))
	copy(buf, "XXXXXXXXXXX")
	v3, _ := c.Check(ctx, "orders", "OrderPlaced", 1, []byte(`{}`))
	for i, v := range []*Violation{v1, v2, v3} {
		if v == nil || v.Type != "OrderPlaced" {
			t.Fatalf("violation %d: %+v", i, v)
		}
	}
}
