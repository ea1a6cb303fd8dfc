package deploy

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// manifests decodes every document of every deploy/k8s file with the
// Kubernetes strict decoder (unknown, duplicate or miscased fields are
// errors) into its typed API object, keyed by "Kind/name".
func manifests(t *testing.T) map[string]runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		policyv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"k8s/optional", "k8s/fanin"} {
		more, _ := filepath.Glob(dir + "/*.yaml")
		files = append(files, more...)
	}
	if len(files) < 8 {
		t.Fatalf("k8s manifests: found only %v", files)
	}
	objs := map[string]runtime.Object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i+1, err)
			}
			name := obj.(interface{ GetName() string }).GetName()
			if obj.(interface{ GetNamespace() string }).GetNamespace() != "" {
				t.Errorf("%s: %s/%s names a namespace; leave it to kubectl -n", f, gvk.Kind, name)
			}
			key := gvk.Kind + "/" + name
			if _, dup := objs[key]; dup {
				t.Fatalf("%s: %s defined twice", f, key)
			}
			objs[key] = obj
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func get[T runtime.Object](t *testing.T, objs map[string]runtime.Object, key string) T {
	t.Helper()
	o, ok := objs[key].(T)
	if !ok {
		keys := make([]string, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("k8s: no %s (have %v)", key, keys)
	}
	return o
}

// workload is one pod template and the role its program logs in as.
type workload struct {
	key, role, command string
	pod                corev1.PodTemplateSpec
}

// workloads are the pod templates of both sources: the main manifests'
// (prefix "deltabus-") and the second source's in k8s/fanin
// ("deltabus-billing-").
func workloads(t *testing.T, objs map[string]runtime.Object) []workload {
	t.Helper()
	var out []workload
	for _, p := range []string{"deltabus-", "deltabus-billing-"} {
		out = append(out,
			workload{"Job/" + p + "migrate", "deltabus_migrate", "migrate", get[*batchv1.Job](t, objs, "Job/"+p+"migrate").Spec.Template},
			workload{"Deployment/" + p + "relay", "deltabus_relay", "run", get[*appsv1.Deployment](t, objs, "Deployment/"+p+"relay").Spec.Template},
			workload{"CronJob/" + p + "reconcile", "deltabus_reconcile", "reconcile", get[*batchv1.CronJob](t, objs, "CronJob/"+p+"reconcile").Spec.JobTemplate.Spec.Template},
			workload{"CronJob/" + p + "janitor", "deltabus_janitor", "janitor", get[*batchv1.CronJob](t, objs, "CronJob/"+p+"janitor").Spec.JobTemplate.Spec.Template})
	}
	return out
}

// TestK8sPodsAreLockedDown: every DeltaBus pod runs the relay image as a
// non-root user with a read-only root filesystem, no privilege escalation,
// no capabilities, no service account token, and with resource requests and
// a memory limit.
func TestK8sPodsAreLockedDown(t *testing.T) {
	objs := manifests(t)
	for _, w := range workloads(t, objs) {
		spec := w.pod.Spec
		psc := spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod securityContext %+v; want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", w.key, psc)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || spec.ServiceAccountName != "deltabus" {
			t.Errorf("%s: want serviceAccountName deltabus without a mounted token", w.key)
		}
		if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
			t.Fatalf("%s: want one container", w.key)
		}
		c := spec.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
			*sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container securityContext %+v; want readOnlyRootFilesystem, no privilege escalation, drop ALL", w.key, sc)
		}
		if !strings.HasPrefix(c.Image, "deltabus/relay:") || strings.HasSuffix(c.Image, ":latest") {
			t.Errorf("%s: image %q; want a pinned deltabus/relay tag", w.key, c.Image)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() ||
			c.Resources.Limits.Memory().Cmp(*c.Resources.Requests.Memory()) < 0 {
			t.Errorf("%s: resources %+v; want cpu and memory requests and a memory limit above the request", w.key, c.Resources)
		}
		if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != w.command {
			t.Errorf("%s: command %v args %v; want the image's entrypoint with args [%s ...]", w.key, c.Command, c.Args, w.command)
		}
		for _, m := range c.VolumeMounts {
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.EmptyDir != nil }) {
				t.Errorf("%s: mount %s is not an emptyDir of the pod", w.key, m.Name)
			}
		}
	}
}

// TestK8sCredentials: each program gets its own role's DSN and password
// from its own Secret through the environment; no argument carries a
// credential; the example Secrets name the right role and no password in
// the DSN.
func TestK8sCredentials(t *testing.T) {
	objs := manifests(t)
	seen := map[string]string{}
	for _, w := range workloads(t, objs) {
		c := w.pod.Spec.Containers[0]
		secretOf := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				if e.ValueFrom.SecretKeyRef.Key != e.Name {
					t.Errorf("%s: env %s from key %s; keep the names equal", w.key, e.Name, e.ValueFrom.SecretKeyRef.Key)
				}
				secretOf[e.Name] = e.ValueFrom.SecretKeyRef.Name
			} else if isCredentialName(e.Name) {
				t.Errorf("%s: env %s is not from a Secret", w.key, e.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil {
				t.Errorf("%s: envFrom a whole Secret; name each key", w.key)
			}
		}
		db := secretOf["DELTABUS_SOURCE"]
		if db == "" || secretOf["PGPASSWORD"] != db {
			t.Fatalf("%s: DELTABUS_SOURCE from %q, PGPASSWORD from %q; want both from the role's Secret", w.key, db, secretOf["PGPASSWORD"])
		}
		if other, dup := seen[db]; dup {
			t.Errorf("%s and %s share the Secret %s; each role has its own", w.key, other, db)
		}
		seen[db] = w.key
		secret := get[*corev1.Secret](t, objs, "Secret/"+db)
		dsn, err := url.Parse(secret.StringData["DELTABUS_SOURCE"])
		if err != nil || dsn.User.Username() != w.role {
			t.Errorf("%s: Secret %s DSN %q; want user %s", w.key, db, secret.StringData["DELTABUS_SOURCE"], w.role)
		} else if _, has := dsn.User.Password(); has || dsn.Query().Has("password") {
			t.Errorf("Secret %s: password in the DSN; put it in PGPASSWORD", db)
		}
		for _, a := range append(slices.Clone(c.Args), c.Command...) {
			if isCredentialName(a) || strings.Contains(a, "://") {
				t.Errorf("%s: argument %q carries a credential or a DSN", w.key, a)
			}
		}
		needsS3 := w.command == "run" || w.command == "reconcile"
		if got := secretOf["AWS_SECRET_ACCESS_KEY"] != ""; got != needsS3 {
			t.Errorf("%s: S3 keys given %v; want %v", w.key, got, needsS3)
		}
		if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.ConfigMapRef != nil && e.ConfigMapRef.Name == "deltabus-config"
		}) {
			t.Errorf("%s: does not read the deltabus-config ConfigMap", w.key)
		}
	}
	cm := get[*corev1.ConfigMap](t, objs, "ConfigMap/deltabus-config")
	for k, v := range cm.Data {
		if isCredentialName(k) || strings.Contains(v, "@") {
			t.Errorf("ConfigMap deltabus-config: %s looks like a credential", k)
		}
	}
	if !strings.HasPrefix(cm.Data["DELTABUS_STORE"], "s3://") {
		t.Errorf("ConfigMap: DELTABUS_STORE %q; two replicas need a shared s3:// store", cm.Data["DELTABUS_STORE"])
	}
}

func isCredentialName(s string) bool {
	u := strings.ToUpper(s)
	return strings.Contains(u, "PASSWORD") || strings.Contains(u, "SECRET") || strings.Contains(u, "ACCESS_KEY")
}

// TestK8sRelay: two replicas with --standby, probes on the metrics port the
// relay listens on (every interface), scraping by annotations, Service and
// ServiceMonitor, and one pod at a time in updates and drains.
func TestK8sRelay(t *testing.T) {
	objs := manifests(t)
	d := get[*appsv1.Deployment](t, objs, "Deployment/deltabus-relay")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("relay replicas %v; want 2 (one streams, one waits)", d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"run", "--standby"}) {
		t.Errorf("relay args %v; want [run --standby]", c.Args)
	}
	addr := ""
	for _, e := range c.Env {
		if e.Name == "DELTABUS_METRICS_ADDR" {
			addr = e.Value
		}
	}
	if !regexp.MustCompile(`^(0\.0\.0\.0)?:9464$`).MatchString(addr) {
		t.Errorf("relay DELTABUS_METRICS_ADDR %q; want :9464 (probes and Prometheus come from outside the pod)", addr)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9464 {
		t.Fatalf("relay ports %+v; want metrics 9464", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("metrics") || p.TimeoutSeconds == 0 {
			t.Errorf("relay %s probe %+v; want GET /healthz on the metrics port with a timeout", name, p)
		}
	}
	// The page and /api/status ask for a token, from a Secret that must
	// exist (not optional: a relay must not serve them open by mistake).
	tok := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "DELTABUS_STATUS_TOKEN" })
	if tok < 0 || c.Env[tok].ValueFrom == nil || c.Env[tok].ValueFrom.SecretKeyRef == nil ||
		(c.Env[tok].ValueFrom.SecretKeyRef.Optional != nil && *c.Env[tok].ValueFrom.SecretKeyRef.Optional) {
		t.Errorf("relay: DELTABUS_STATUS_TOKEN not from a required Secret; the operator's page would be open")
	} else {
		secret := get[*corev1.Secret](t, objs, "Secret/"+c.Env[tok].ValueFrom.SecretKeyRef.Name)
		if len(secret.StringData["DELTABUS_STATUS_TOKEN"]) < 32 {
			t.Errorf("Secret %s: the example token is shorter than the relay accepts", secret.Name)
		}
	}
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9464" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("relay pod annotations %v; want prometheus.io scrape/port/path", ann)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("relay strategy %+v; want rolling, one pod at a time", d.Spec.Strategy)
	}
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("relay terminationGracePeriodSeconds %v; want time to finish a batch", g)
	}
	podLabels := d.Spec.Template.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(d.Spec.Selector.MatchLabels) {
		t.Error("relay selector does not match its pod labels")
	}
	svc := get[*corev1.Service](t, objs, "Service/deltabus-relay-metrics")
	if !matches(svc.Spec.Selector) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort != intstr.FromString("metrics") {
		t.Errorf("metrics Service %+v; want the relay pods' metrics port", svc.Spec)
	}
	sm := get[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor/deltabus-relay")
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the Service lacks", k, v)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v; want port metrics, path /metrics", sm.Spec.Endpoints)
	}
	pdb := get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/deltabus-relay")
	if !matches(pdb.Spec.Selector.MatchLabels) || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("relay PodDisruptionBudget %+v; want maxUnavailable 1 over the relay pods", pdb.Spec)
	}
}

// TestK8sJobs: migrate is a Job; reconcile and janitor are CronJobs with a
// valid schedule that never overlap; a reconcile divergence (exit 1) fails
// its Job without retries.
func TestK8sJobs(t *testing.T) {
	objs := manifests(t)
	job := get[*batchv1.Job](t, objs, "Job/deltabus-migrate")
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || job.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("migrate Job: restartPolicy %q, activeDeadlineSeconds %v", job.Spec.Template.Spec.RestartPolicy, job.Spec.ActiveDeadlineSeconds)
	}
	for _, name := range []string{"deltabus-reconcile", "deltabus-janitor"} {
		cj := get[*batchv1.CronJob](t, objs, "CronJob/"+name)
		if _, err := cron.ParseStandard(cj.Spec.Schedule); err != nil {
			t.Errorf("%s schedule %q: %v", name, cj.Spec.Schedule, err)
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: concurrencyPolicy %q; want Forbid", name, cj.Spec.ConcurrencyPolicy)
		}
		js := cj.Spec.JobTemplate.Spec
		if js.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || js.ActiveDeadlineSeconds == nil || js.BackoffLimit == nil {
			t.Errorf("%s: want restartPolicy Never, activeDeadlineSeconds and backoffLimit", name)
		}
	}
	rec := get[*batchv1.CronJob](t, objs, "CronJob/deltabus-reconcile").Spec.JobTemplate.Spec
	pfp := rec.PodFailurePolicy
	if pfp == nil || len(pfp.Rules) == 0 || pfp.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
		pfp.Rules[0].OnExitCodes == nil || !slices.Equal(pfp.Rules[0].OnExitCodes.Values, []int32{1}) ||
		*pfp.Rules[0].OnExitCodes.ContainerName != rec.Template.Spec.Containers[0].Name {
		t.Errorf("reconcile podFailurePolicy %+v; want FailJob on exit code 1 of the reconcile container", pfp)
	}
	// The janitor's retention covers the range reconcile checks.
	jan := get[*batchv1.CronJob](t, objs, "CronJob/deltabus-janitor").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	recArgs := rec.Template.Spec.Containers[0].Args
	if r, l := flagValue(jan, "--retention"), flagValue(recArgs, "--last"); r == "" || l == "" || mustDuration(t, r) <= mustDuration(t, l) {
		t.Errorf("janitor --retention %q must exceed reconcile --last %q", r, l)
	}
}

func flagValue(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// TestK8sNoStrayFiles: every YAML under deploy/k8s decodes (manifests
// fails otherwise) and nothing else hides there.
func TestK8sNoStrayFiles(t *testing.T) {
	err := filepath.WalkDir("k8s", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Ext(path) != ".yaml" {
			t.Errorf("k8s: %s is not a .yaml manifest", path)
		}
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("\t")) {
			t.Errorf("%s: tab characters", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	manifests(t)
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}
