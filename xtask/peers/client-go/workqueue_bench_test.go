package peers

// The client-go side of `cargo xtask bench workqueue`. Each sub-benchmark carries the ID of its
// counterpart in crates/workqueue/benches/workqueue.rs after "BenchmarkWorkqueue/", e.g.
// "workqueue/add_get_done/workers=8". Items are uint64, as there (u64), so neither side pays
// for hashing strings the other does not.

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
)

const queueItems = 10_000

// BenchmarkWorkqueue moves 10,000 distinct items through a fresh queue per iteration; building
// the queue is timed, as on the Rust side.
func BenchmarkWorkqueue(b *testing.B) {
	b.Run("workqueue/add_get_done/inline", func(b *testing.B) {
		for b.Loop() {
			q := workqueue.NewTyped[uint64]()
			for item := range uint64(queueItems) {
				q.Add(item)
			}
			for q.Len() > 0 {
				item, _ := q.Get()
				q.Done(item)
			}
			q.ShutDown()
		}
	})

	// The Rust side runs its workers on a two-thread tokio runtime; goroutines here run on
	// GOMAXPROCS threads, two on this machine.
	for _, c := range []struct {
		name    string
		workers int
	}{{"workqueue/add_get_done/workers=1", 1}, {"workqueue/add_get_done/workers=8", 8}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				q := workqueue.NewTyped[uint64]()
				var workers sync.WaitGroup
				for range c.workers {
					workers.Go(func() {
						for {
							item, shutdown := q.Get()
							if shutdown {
								return
							}
							q.Done(item)
						}
					})
				}
				for item := range uint64(queueItems) {
					q.Add(item)
				}
				q.ShutDown()
				workers.Wait()
			}
		})
	}

	// client-go's BenchmarkDelayingQueue_AddAfter on a fixed 10,000 items: a pseudo-random delay
	// under ten minutes each (fixed seed), the fake clock stepped eleven minutes, every item got
	// and done.
	b.Run("workqueue/delaying/add_after_then_get", func(b *testing.B) {
		for b.Loop() {
			clock := testingclock.NewFakeClock(time.Now())
			q := workqueue.NewTypedDelayingQueueWithConfig(
				workqueue.TypedDelayingQueueConfig[uint64]{Clock: clock})
			seed := rand.New(rand.NewPCG(7, 7))
			for item := range uint64(queueItems) {
				q.AddAfter(item, time.Duration(seed.Int64N(int64(10*time.Minute))))
			}
			clock.Step(11 * time.Minute)
			for got := 0; got < queueItems; {
				// The waiting loop hands items over from its own goroutine and may arm its
				// next timer from a clock reading taken before the step, which only a later
				// step fires: step again rather than block in Get with nothing ready.
				if q.Len() == 0 {
					clock.Step(time.Minute)
					runtime.Gosched()
					continue
				}
				item, _ := q.Get()
				q.Done(item)
				got++
			}
			q.ShutDown()
		}
	})
}
