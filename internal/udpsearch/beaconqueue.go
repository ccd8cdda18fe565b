package udpsearch

import (
	"sync"

	"go.uber.org/zap"

	"github.com/pvans-project/pvans/internal/beacon"
	"github.com/pvans-project/pvans/internal/limitlog"
)

// beaconQueue hands sightings from the receive goroutines to the tracker
// through a bounded queue drained by its own goroutine. The tracker's
// events end in registry writes and probes; taken on the receive goroutine
// they would make every search wait behind the registry's writer lock. A
// sighting that finds the queue full is dropped and counted (the server's
// next beacon, at most 15 s later, brings it again).
type beaconQueue struct {
	ll   *limitlog.Log
	sink BeaconSink
	ch   chan beacon.Observation
	st   *counters
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

func newBeaconQueue(sink BeaconSink, n int, st *counters, log *zap.Logger) *beaconQueue {
	return &beaconQueue{sink: sink, ch: make(chan beacon.Observation, n), st: st, stop: make(chan struct{}),
		ll: limitlog.New(log, 0, nil)}
}

// Observe queues o without ever blocking.
func (q *beaconQueue) Observe(o beacon.Observation) {
	select {
	case q.ch <- o:
	default:
		q.st.dropBeaconQueue.Add(1)
		q.ll.Hit("beacon_queue", "sightings queue to the server tracker full; sighting dropped",
			zap.Int("beacon_queue", cap(q.ch)), zap.Stringer("server", o.Endpoint))
	}
}

func (q *beaconQueue) start() {
	q.done.Add(1)
	go func() {
		defer q.done.Done()
		for {
			select {
			case o := <-q.ch:
				q.sink.Observe(o)
			case <-q.stop:
				return
			}
		}
	}()
}

// close stops delivery (queued sightings are dropped) without waiting for
// a delivery in progress: the sink may be what is stuck.
func (q *beaconQueue) close() { q.once.Do(func() { close(q.stop) }) }
