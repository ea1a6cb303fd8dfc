//go:build !linux

package relay

// YieldOnWakeup does nothing outside Linux (see the Linux version): the
// process keeps the scheduler's defaults.
func YieldOnWakeup() error { return nil }

func schedPolicyName() string { return "default" }
