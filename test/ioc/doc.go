// Package ioc holds the tests of the simulated site as a user meets it in
// `pvans demo`: a client asks pvans over TCP (EPICS_PVA_NAME_SERVERS), then
// connects to the simulated server it was sent to and uses the PV there
// (GET_FIELD, PUT then GET, MONITOR); and the site's runtime controls
// (restart, kill, stop, add and remove names, new server) with what pvans
// does about each. pvans and the site run in process on loopback.
package ioc
