// Package bootstrap starts a relay on a database that already has outbox
// rows, and recovers one whose slot was lost: snapshot, then stream, with no
// gap and no duplicate at the seam.
package bootstrap
