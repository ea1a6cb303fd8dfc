package deploy

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The objects of the second source (k8s/fanin) and of its example Secrets,
// each with its counterpart in the main manifests.
var faninObjects = map[string]string{
	"Job/deltabus-billing-migrate":               "Job/deltabus-migrate",
	"Deployment/deltabus-billing-relay":          "Deployment/deltabus-relay",
	"PodDisruptionBudget/deltabus-billing-relay": "PodDisruptionBudget/deltabus-relay",
	"Service/deltabus-billing-relay-metrics":     "Service/deltabus-relay-metrics",
	"CronJob/deltabus-billing-reconcile":         "CronJob/deltabus-reconcile",
	"CronJob/deltabus-billing-janitor":           "CronJob/deltabus-janitor",
	"Secret/deltabus-billing-migrate-db":         "Secret/deltabus-migrate-db",
	"Secret/deltabus-billing-relay-db":           "Secret/deltabus-relay-db",
	"Secret/deltabus-billing-reconcile-db":       "Secret/deltabus-reconcile-db",
	"Secret/deltabus-billing-janitor-db":         "Secret/deltabus-janitor-db",
}

// TestK8sFaninIsACopy: the second source's manifests are the main ones with
// only the names, the component labels and the Secrets changed (so they
// cannot drift from what the other tests check), read with the same
// ConfigMap (one store, the default source identity), and their Secrets
// name another database.
func TestK8sFaninIsACopy(t *testing.T) {
	objs := manifests(t)
	for billing, main := range faninObjects {
		b, m := objs[billing], objs[main]
		if b == nil || m == nil {
			t.Fatalf("k8s: %s or %s missing", billing, main)
		}
		if s, ok := b.(*corev1.Secret); ok {
			bu, err1 := url.Parse(s.StringData["DELTABUS_SOURCE"])
			mu, err2 := url.Parse(m.(*corev1.Secret).StringData["DELTABUS_SOURCE"])
			if err1 != nil || err2 != nil || bu.User.Username() != mu.User.Username() || bu.Host+bu.Path == mu.Host+mu.Path {
				t.Errorf("%s: DSN %v; want %s's role on another database than %v", billing, bu, main, mu)
			}
			continue
		}
		if svc, ok := b.(*corev1.Service); ok {
			svc = svc.DeepCopy()
			if svc.Labels["app.kubernetes.io/instance"] != "billing" {
				t.Errorf("%s: labels %v; want app.kubernetes.io/instance billing", billing, svc.Labels)
			}
			delete(svc.Labels, "app.kubernetes.io/instance")
			svc.Labels["app.kubernetes.io/component"] += "-billing"
			b = svc
		}
		if got, want := renamedBack(t, b), asJSON(t, m); got != want {
			t.Errorf("%s differs from %s beyond its names:\n%s\n%s", billing, main, got, want)
		}
	}
	for key := range objs {
		if strings.Contains(key, "billing") && faninObjects[key] == "" {
			t.Errorf("k8s: %s has no counterpart in faninObjects", key)
		}
	}
}

// renamedBack is o as JSON with the second source's names turned into the
// main ones.
func renamedBack(t *testing.T, o runtime.Object) string {
	s := asJSON(t, o)
	s = strings.ReplaceAll(s, "deltabus-billing-", "deltabus-")
	return strings.ReplaceAll(s, `-billing"`, `"`)
}

func asJSON(t *testing.T, o runtime.Object) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestK8sFaninSelectors: neither source's Deployment, PodDisruptionBudget or
// metrics Service selects the other's relay pods (a pod under two budgets
// cannot be evicted, a drain would block), and the one ServiceMonitor
// scrapes both Services.
func TestK8sFaninSelectors(t *testing.T) {
	objs := manifests(t)
	pods := map[string]map[string]string{}
	for _, d := range []string{"deltabus-relay", "deltabus-billing-relay"} {
		pods[d] = get[*appsv1.Deployment](t, objs, "Deployment/"+d).Spec.Template.Labels
	}
	selects := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for own := range pods {
		sels := map[string]map[string]string{
			"Deployment":          get[*appsv1.Deployment](t, objs, "Deployment/"+own).Spec.Selector.MatchLabels,
			"PodDisruptionBudget": get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/"+own).Spec.Selector.MatchLabels,
			"Service":             get[*corev1.Service](t, objs, "Service/"+own+"-metrics").Spec.Selector,
		}
		for kind, sel := range sels {
			for other, labels := range pods {
				if got, want := selects(sel, labels), other == own; got != want {
					t.Errorf("%s/%s selects %s's pods: %t; want %t", kind, own, other, got, want)
				}
			}
		}
	}
	sm := get[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor/deltabus-relay")
	for _, svc := range []string{"deltabus-relay-metrics", "deltabus-billing-relay-metrics"} {
		if !selects(sm.Spec.Selector.MatchLabels, get[*corev1.Service](t, objs, "Service/"+svc).Labels) {
			t.Errorf("ServiceMonitor deltabus-relay does not scrape Service %s", svc)
		}
	}
}
