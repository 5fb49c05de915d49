package peers

// The client-go side of `cargo xtask bench fifo`. Each sub-benchmark carries the same ID as its
// counterpart in crates/fifo/benches/fifo.rs (the part after "BenchmarkFifo/", e.g.
// "fifo/add_pop/100k"), measures the same work per iteration, and builds its Pods before the
// timer starts.

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const benchObjects = 100_000

// benchPod is the Pod of crates/fifo/benches/fifo.rs, field for field: namespace "bench", name
// pod-<i>, a uid and resourceVersion, five labels, two containers (image, port, requests) and
// a node name.
func benchPod(i int, rv int) *corev1.Pod {
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name:  name,
			Image: fmt.Sprintf("registry.example.com/%s:1.2.3", name),
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				},
			},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "bench",
			Name:            fmt.Sprintf("pod-%d", i),
			UID:             types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			ResourceVersion: strconv.Itoa(rv),
			Labels: map[string]string{
				"app":               fmt.Sprintf("app-%d", i%50),
				"tier":              "backend",
				"team":              fmt.Sprintf("team-%d", i%7),
				"pod-template-hash": fmt.Sprintf("%x", i*7919),
				"version":           "v1",
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("app"), container("sidecar")},
			NodeName:   fmt.Sprintf("node-%d", i%100),
		},
	}
}

func benchPods(rv int) []interface{} {
	pods := make([]interface{}, benchObjects)
	for i := range pods {
		pods[i] = benchPod(i, rv)
	}
	return pods
}

// knownCache is the consumer's cache as informers build it: the namespace index included.
func knownCache(objects []interface{}) cache.Indexer {
	known := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := known.Replace(objects, "1"); err != nil {
		panic(err)
	}
	return known
}

func emptyCache() cache.Indexer {
	return cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
}

func newDeltaFIFO(known cache.KeyListerGetter) *cache.DeltaFIFO {
	return cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KeyFunction:           cache.MetaNamespaceKeyFunc,
		KnownObjects:          known,
		EmitDeltaTypeReplaced: true,
	})
}

func newRealFIFO(known cache.KeyListerGetter) *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: known,
	})
}

func newAtomicRealFIFO() *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		KeyFunction:           cache.MetaNamespaceKeyFunc,
		AtomicEvents:          true,
		UnlockWhileProcessing: true,
		EmitDeltaTypeBookmark: true,
	})
}

func mustNil(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// popAll pops until every queued delta has been processed, counting them as the Rust side's
// process function does.
func popAll(b *testing.B, q cache.Queue, batched bool) int {
	popped := 0
	single := func(obj interface{}, _ bool) error {
		popped += len(obj.(cache.Deltas))
		return nil
	}
	batch := func(deltas []cache.Delta, _ bool) error {
		popped += len(deltas)
		return nil
	}
	for popped < benchObjects {
		if batched {
			mustNil(b, q.(cache.QueueWithBatch).PopBatch(batch, single))
		} else {
			_, err := q.Pop(single)
			mustNil(b, err)
		}
	}
	return popped
}

func fill(b *testing.B, q cache.Queue, objects []interface{}) {
	for _, obj := range objects {
		mustNil(b, q.Add(obj))
	}
}

// BenchmarkFifo runs crates/fifo/benches/fifo.rs's scenarios. As there, building the queue and
// the list handed to it is not timed (b.StopTimer), the rest is.
func BenchmarkFifo(b *testing.B) {
	objects := benchPods(1)
	listed := benchPods(2)
	empty := emptyCache()
	known := knownCache(objects)

	// Untimed setup, then the timed body, as criterion's iter_batched. Setups are made `pool`
	// at a time: stopping the timer costs far more than a cheap body, and Go's benchtime counts
	// only timed work, so a cheap body with a per-iteration setup would run for minutes.
	runPooled := func(name string, pool int, setup func() cache.Queue, body func(q cache.Queue)) {
		b.Run(name, func(b *testing.B) {
			var ready []cache.Queue
			for b.Loop() {
				if len(ready) == 0 {
					b.StopTimer()
					for range pool {
						ready = append(ready, setup())
					}
					b.StartTimer()
				}
				q := ready[len(ready)-1]
				ready = ready[:len(ready)-1]
				body(q)
			}
		})
	}
	run := func(name string, setup func() cache.Queue, body func(q cache.Queue)) {
		runPooled(name, 1, setup, body)
	}

	run("fifo/add_pop/100k", func() cache.Queue { return newDeltaFIFO(nil) }, func(q cache.Queue) {
		fill(b, q, objects)
		popAll(b, q, false)
	})
	run("fifo/pop/100k", func() cache.Queue {
		q := newDeltaFIFO(nil)
		fill(b, q, objects)
		return q
	}, func(q cache.Queue) { popAll(b, q, false) })
	// Replace reads its list and keeps it (atomic mode) but never writes it, so every iteration
	// can share one; the Rust side clones its Vec only because replace takes ownership.
	run("fifo/replace/100k", func() cache.Queue { return newDeltaFIFO(known) },
		func(q cache.Queue) { mustNil(b, q.Replace(listed, "2")) })

	run("real_fifo/add_pop/100k", func() cache.Queue { return newRealFIFO(empty) }, func(q cache.Queue) {
		fill(b, q, objects)
		popAll(b, q, false)
	})
	for _, c := range []struct {
		name    string
		batched bool
	}{{"real_fifo/pop/100k", false}, {"real_fifo/pop_batch/100k", true}} {
		run(c.name, func() cache.Queue {
			q := newRealFIFO(empty)
			fill(b, q, objects)
			return q
		}, func(q cache.Queue) { popAll(b, q, c.batched) })
	}
	run("real_fifo/replace/100k", func() cache.Queue { return newRealFIFO(known) },
		func(q cache.Queue) { mustNil(b, q.Replace(listed, "2")) })
	runPooled("real_fifo/replace_atomic/100k", 10_000, func() cache.Queue { return newAtomicRealFIFO() },
		func(q cache.Queue) { mustNil(b, q.Replace(listed, "2")) })
}
