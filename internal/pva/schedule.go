package pva

import "time"

// The beacon schedule PVXS servers keep (Server::Pvt::doBeacons; pvAccessCPP
// keeps the same periods): the first beacon at once, ten more 15 s apart,
// then one every 180 s, so beacons leave at t = 0, 15, …, 150, 330, 510, ….
const (
	BeaconFastPeriod = 15 * time.Second
	BeaconFastCount  = 10 // beacons after the first at the fast period
	BeaconSlowPeriod = 180 * time.Second
)

// BeaconAfter is how long a server waits after its sent-th beacon (1 for
// the first) before the next one.
func BeaconAfter(sent int) time.Duration {
	if sent <= BeaconFastCount {
		return BeaconFastPeriod
	}
	return BeaconSlowPeriod
}
