// Package visible tells when each Delta commit of a local store became
// visible: the moment its log entry got its name in _delta_log, which is
// when a reader listing the log could first see it. The benchmarks count
// an event's latency to it.
//
// A file's own times cannot say it. The kernel stamps mtime and ctime from
// its coarse clock, which on the project's machine moves in 4 ms steps and
// reads 3-7 ms behind the clock source commit times come from; and mtime
// is the time of the last write, before the relay's fsync and link. Both
// understated a latency by about one step (visible minus mtime, in a 30 s
// run at 2,000 tx/s: p1 3.4 ms, p50 5.8 ms, p99 11.6 ms).
//
// A Watcher uses inotify (Linux): the store's root (new tables), each
// table's folder (its _delta_log) and each _delta_log (IN_CREATE for a
// link(2), IN_MOVED_TO for a rename(2)). A thread of its own waits in
// poll(2) and reads the events at once, stamping each with the time its
// read returned, so a time is late by that thread's wake-up, never early. A commit made before its folder was
// watched (a table's first entries, while the watches are added) has no
// time: At falls back to the file's ctime and says so, for the caller to
// count. The root's parent is watched for the root's name: an S3 server
// that keeps objects as files (versitygw's posix backend, which the S3
// latency run can watch the same way) removes a folder once it is empty
// and makes it again with the next object. Elsewhere than Linux, Watch
// returns nil and the callers keep the file's mtime.
package visible
