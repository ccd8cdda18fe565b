// Package probe learns each server's PV names over TCP and keeps watch on
// the server: it connects as a PVA client, creates the `server` channel,
// runs the RPC pvxlist runs (NTURI query.op="channels", and "info" for
// operators), reports the complete name set, and keeps the connection open
// with ECHO so a dead server is reported lost in seconds instead of at
// beacon expiry.
//
// It owns the probe schedule (a bounded pool of concurrent probes shared
// fairly between server hosts, see sched; backoff with jitter after
// failures; periodic re-listing), the watch connections, the static server
// list and the static name files. It does not own the
// registry or the beacon table: results go to a Sink the daemon wires to
// the registry, and the daemon turns beacon events into Probe and Forget
// calls.
//
// # Per-server life
//
// A server's state is one value (life.go) in four parts: its phase, its
// run, its origin and its identity. One function, step, changes it: it
// takes an event and returns the next state and the actions to take. The
// lines below are step's tables, line for line (TestLifeDiagram fails when
// they differ): "any" is every state but forgotten, "same" keeps the
// state, and an event a part has no line for leaves that part as it is.
// Once forgotten, nothing changes.
//
// The phase is what the Sink was told, and whether the endpoint answered
// over TCP since:
//
//	new           named by a probe request; nothing reported yet
//	listed        Listed reported; the listing's connection is the watch
//	refused       Unlistable reported: it answered over TCP but did not list
//	failing       a report outstanding, then an attempt failed: not reached,
//	              the connection dropped, or the listing timed out
//	lost          Lost reported, and no sign of life since: failures are
//	              retried quietly
//	hinted        Lost reported, then a probe request: the next failure
//	              reports Unlistable again
//	lost-failing  Lost, then Unlistable for a failure: nothing answered over
//	              TCP since the loss
//	forgotten     the end: no report, no timer, no connection
//
//	any ─ lists ─► listed: Listed, re-list
//	any ─ refuses ─► refused: Unlistable, retry
//	new ─ fails ─► failing: Unlistable, retry
//	hinted ─ fails ─► lost-failing: Unlistable, retry
//	listed, refused, failing ─ fails ─► failing: retry
//	lost, lost-failing ─ fails ─► same: retry
//	lost ─ announce, reply, add-static ─► hinted
//	listed, refused, failing, lost-failing ─ watch-ends, restarted ─► lost: Lost
//	listed ─ refuted ─► same: re-list
//	refused, failing, lost, hinted, lost-failing ─ refuted ─► same: retry
//	listed, refused, failing, lost-failing ─ drop ─► forgotten: Lost, forget
//	new, lost, hinted ─ drop ─► forgotten: forget
//	any ─ forget ─► forgotten: forget
//
// The run is the probe, one at most per server. Probing covers waiting
// for a slot of the pool (a queue entry, not a goroutine: see sched),
// then connecting and listing in a goroutine of its own; a forgotten
// server's queue entry is taken out, and its goroutine ends at its next
// step (its context is cancelled, so dialling ends at once):
//
//	idle          no probe: waiting for a timer or a request
//	probing       a probe owns the server, queued or running
//	again         probing, and asked again meanwhile: it probes once more
//
//	idle ─ start ─► probing: stop timer, spawn
//	probing, again ─ start ─► again
//	probing ─ settled ─► idle
//	again ─ settled ─► probing: stop timer, probe again
//	idle ─ watch-ends ─► same: retry from 1
//
// The origin is who named the server, which decides how long it is kept:
//
//	announced     a beacon, a discovery reply or an operator: kept until
//	              Forget (the daemon's, at beacon expiry)
//	through       only search-through replies (anyone can name any endpoint
//	              in one): dropped after ThroughRetries failures in a row,
//	              and at most MaxThrough such at once
//	static        the static list: kept until taken off it, then dropped
//	              unless it has a GUID of its own (a beacon's, or its own
//	              ping answer)
//
//	through ─ announce ─► announced
//	through, announced ─ add-static ─► static
//	static ─ drop-static ─► announced
//
// The events:
//
//	announce      Probe for a beacon, a discovery reply or an operator
//	reply         Probe for a search-through reply
//	add-static    Probe for the static list (SetStatic)
//	drop-static   SetStatic without it
//	start         probe now: a request (a hint at most once per backoff
//	              step), or the timer
//	lists         an attempt listed it on a connection that is still up
//	refuses       an attempt connected, and the listing was refused or
//	              could not be decoded, or the `server` channel went
//	              unanswered while the echo sent after it was answered (no
//	              `server` PV: Phoebus core-pva)
//	fails         an attempt could not connect, its connection dropped, or
//	              the listing timed out
//	refuted       a restart claim's check found the watched server there
//	restarted     a restart confirmed over TCP whose new instance did not
//	              list: the old instance's names go
//	watch-ends    the watch connection was closed or went silent
//	settled       an attempt's outcome was recorded
//	drop          forgotten with a Lost owed: a search-through endpoint's
//	              retry budget spent, a static server taken off the list
//	forget        Forget, ForgetUnproven, Close: no report
//
// Listed, Unlistable and Lost are the Sink's calls; re-list arms the
// server's one timer for Reprobe (±10 %), retry for the backoff of the
// failures so far (in the refused phase a slower one, from
// UnlistableRetryMin doubling to UnlistableRetryMax: each attempt may be
// a warning in the server's log), and "retry from 1" for the backoff
// after one failure;
// spawn queues the probe (its goroutine starts when it holds a slot); forget cancels it, stops the timers and
// closes the watch. A re-listing (periodic, or because the beacon's change
// count moved) runs on the existing watch connection.
//
// A hint (a discovery or search-through reply, a beacon's first sighting)
// for a refused server whose watch is up, claiming no new GUID, starts no
// attempt: it waits for that schedule (HintsDeferred).
//
// What other parts ask is read from the state. Proven (Proven,
// ForgetUnproven) is a static origin, a listed or refused phase, names
// from a listing, or a live watch: beyond the static list, only a TCP
// exchange proves a server. Gone is lost, hinted or lost-failing. The
// operator's State is probing while a goroutine runs, else idle (new),
// listed, unlistable (refused, or a live watch) or failed.
//
// # Identity: proof and claims
//
// A GUID is proven by the endpoint itself: its answer to the discovery
// ping sent on every fresh connection (over TCP from PVXS; over UDP from
// pvAccessCPP, to the reply port the ping carries, see PingAnswer; from
// Phoebus core-pva, which ignores the ping, its answer to a search of
// `server` with CID −1 under the ping's sequence ID, sent once it showed
// it has no `server` PV: pingJava), or, from a server that answers no
// empty search, its answer to a search on the same sequence ID for a name
// it has just listed there. A GUID
// from a hint (beacon, discovery or search reply) is a claim. The first
// claim names a server never seen; after that a claim is never adopted on
// its own:
//
//	claim while watched ─► checked on a fresh connection; a ping answer with
//	                       another GUID confirms it, anything else refutes it
//	fresh connection, ping answered ─► that GUID, whatever was claimed
//	  (or a listed name's search answered)
//	fresh connection, no answer ─► the GUID proven last stays
//	watch closed by the server, connection refused ─► gone: the next claim
//	                       is taken without a ping answer (a new instance)
//	watch ended by silence (idle timeout, blip) ─► proves nothing; pending
//	                       claims are dropped, the GUID stays
//
// So forged beacons with other GUIDs cost one check per backoff step and
// can take over only a server that answers no search over TCP at all
// (neither the ping nor a listed name's), and only in the window after it
// was proven gone. These are the identity part of step (ident), on the
// events above and on connected (an attempt's connection and its ping
// answer), conn-refused and confirmed.
//
// # Watch
//
// Like a PVXS client, the probe sends ECHO every EchoInterval. pvaconn
// closes a connection on which nothing at all arrived for IdleTimeout,
// which defaults to one echo interval plus a grace of another interval
// capped at 10 s (25 s at the default 15 s echo): an echo reply that is
// late by up to that grace is tolerated, a missed one is not, and a server
// that dies silently is forgotten within 25 s, under the 30 s the site's
// clients tolerate before they time out themselves. A single lost TCP
// segment costs a retransmission (hundreds of milliseconds), far less than
// the grace, so it never trips the watch. A clean close (FIN/RST) is
// reported at once. A watch's end is one watch-ends event, whether the
// connection's own goroutine or an attempt settling on the dead watch
// finds it first.
package probe
