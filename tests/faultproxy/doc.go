// Package faultproxy is a fault-injecting HTTP proxy for tests that run real
// clients (the relay process, the storage package) against a real server
// (versitygw): it listens on 127.0.0.1, forwards every request to a target
// address, and can be switched at runtime, from any goroutine, to answer
// 500 or 503 SlowDown in the server's place, to hang (accept, take the
// request and never answer until switched back), to reset connections, to
// refuse connections (stop listening), and to add latency; a fault can hit
// only every n-th request, only the first n, and can strike after the
// request reached the server (the client sees a failure for a request that
// took effect: an ambiguous outcome).
//
//	p := faultproxy.New(t, "127.0.0.1:7070") // closed at the end of the test
//	cfg.Endpoint = p.URL()
//	p.Set(faultproxy.Fault{Mode: faultproxy.SlowDown503, Every: 2})
//	...
//	p.Set(faultproxy.Fault{}) // pass again
//
// Guarantees: Set takes effect for every request that arrives after it
// returns (a request is judged once, when it arrives, except that a hung
// request is released by the next Set); requests are counted from the last
// Set, so Every and Limit patterns are deterministic; in Refuse mode the
// port refuses connections and every open connection is closed; Close
// releases everything and returns when the proxy is down. Error answers
// carry an S3 XML error body. Host headers are forwarded unchanged, so
// signed requests (SigV4) stay valid through the proxy.
//
// TCP is the same idea one layer down, for PostgreSQL's protocol: a TCP
// proxy that passes, or black-holes every open and new connection (accepts
// and holds, forwards nothing, closes nothing: the silence of a partition
// or a frozen host), optionally losing the connections for good (a lost
// NAT entry: they stay silent after the partition ends, and only new
// connections pass).
//
//	p := faultproxy.NewTCP(t, "127.0.0.1:5432")
//	p.Set(faultproxy.TCPFault{Mode: faultproxy.BlackHole, Lose: true})
//	p.Set(faultproxy.TCPFault{}) // new connections pass again
package faultproxy
