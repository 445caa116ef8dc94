// Package journeys holds end-to-end tests against the real sessiond binary:
// each journey starts it on a temporary home, talks to it over real
// WebSockets, kills it with SIGKILL or stops it with SIGTERM, restarts it
// on the same home, and checks the store, the snapshots and exactly what
// the fake model received. See README.md, "What the journeys prove".
package journeys
