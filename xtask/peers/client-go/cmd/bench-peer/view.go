package main

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	// emitAnnotation carries the Unix nanoseconds at which the server stored the object.
	emitAnnotation = "bench.kinformer.dev/emit-ns"
	// sentinelPrefix names the objects the server creates after the last change of a phase.
	sentinelPrefix = "bench-sentinel-"
)

// checksum is the protocol's FNV-1a over the (key, resourceVersion) pairs sorted by key.
func checksum(view map[string]string) string {
	keys := slices.Sorted(maps.Keys(view))
	hash := fnv.New64a()
	for _, key := range keys {
		hash.Write([]byte(key))
		hash.Write([]byte{0})
		hash.Write([]byte(view[key]))
		hash.Write([]byte{'\n'})
	}
	return fmt.Sprintf("%016x", hash.Sum64())
}

// handler is one registered event handler and what it saw: its own view of the objects, its call
// counts, the latency samples of annotated objects and the sentinels it met.
//
// client-go calls each handler from its own listener goroutine, so the mutex is uncontended
// except when the main goroutine reads (relist polls handler 0's view; everyone reads at the end).
type handler struct {
	// slow makes every call sleep 1 ms first; fanout switches it on when its phase starts.
	slow atomic.Bool
	// sampling is switched on when a phase starts: objects listed at sync may carry the
	// annotation of an older run against the same server, which is no latency of this one.
	sampling atomic.Bool

	mu        sync.Mutex
	view      map[string]string
	adds      uint64
	updates   uint64
	deletes   uint64
	latencies []int64 // nanoseconds
	sentinels map[string]struct{}
	// sentinelSeen gets a token whenever a sentinel arrives, so waiters need not poll.
	sentinelSeen chan struct{}
}

func newHandler(expected int) *handler {
	return &handler{
		view:         make(map[string]string, expected),
		sentinels:    make(map[string]struct{}),
		sentinelSeen: make(chan struct{}, 1),
	}
}

// objectKey is cache.MetaNamespaceKeyFunc without its error path: every object an informer
// hands over has metadata.
func objectKey(object metav1.Object) string {
	if namespace := object.GetNamespace(); namespace != "" {
		return namespace + "/" + object.GetName()
	}
	return object.GetName()
}

func (h *handler) funcs() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { h.set(obj, false) },
		UpdateFunc: func(_, newObj any) {
			h.set(newObj, true)
		},
		DeleteFunc: h.remove,
	}
}

func (h *handler) set(obj any, update bool) {
	now := time.Now().UnixNano()
	if h.slow.Load() {
		time.Sleep(time.Millisecond)
	}
	object, ok := obj.(metav1.Object)
	if !ok {
		fail("handler got a %T, which has no metadata", obj)
	}
	key := objectKey(object)
	var latency int64
	annotated := false
	if h.sampling.Load() {
		latency, annotated = emitLatency(object, now)
	}
	sentinel := strings.HasPrefix(object.GetName(), sentinelPrefix)

	h.mu.Lock()
	h.view[key] = object.GetResourceVersion()
	if update {
		h.updates++
	} else {
		h.adds++
	}
	if annotated {
		h.latencies = append(h.latencies, latency)
	}
	if sentinel {
		h.sentinels[key] = struct{}{}
	}
	h.mu.Unlock()

	if sentinel {
		select {
		case h.sentinelSeen <- struct{}{}:
		default:
		}
	}
}

func (h *handler) remove(obj any) {
	if h.slow.Load() {
		time.Sleep(time.Millisecond)
	}
	var key string
	switch deleted := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		key = deleted.Key
	case metav1.Object:
		key = objectKey(deleted)
	default:
		fail("delete handler got a %T, which has no metadata", obj)
	}
	h.mu.Lock()
	delete(h.view, key)
	h.deletes++
	h.mu.Unlock()
}

// emitLatency is the time from the server's emit-ns annotation to now, if the object has one.
func emitLatency(object metav1.Object, now int64) (int64, bool) {
	raw, ok := object.GetAnnotations()[emitAnnotation]
	if !ok {
		return 0, false
	}
	emitted, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		fail("%s annotation %q on %s: %v", emitAnnotation, raw, objectKey(object), err)
	}
	return now - emitted, true
}

// hasSentinel says whether the sentinel with this key has reached the handler.
func (h *handler) hasSentinel(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.sentinels[key]
	return ok
}

// waitSentinel blocks until the sentinel has reached the handler, or the deadline passes.
func (h *handler) waitSentinel(key string, deadline time.Time) bool {
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for !h.hasSentinel(key) {
		select {
		case <-h.sentinelSeen:
		case <-timeout.C:
			return h.hasSentinel(key)
		}
	}
	return true
}

// counts are a handler's calls so far.
type counts struct {
	adds, updates, deletes uint64
}

func (c counts) total() uint64 { return c.adds + c.updates + c.deletes }

func (h *handler) counts() counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return counts{adds: h.adds, updates: h.updates, deletes: h.deletes}
}

// checksum sums a copy, so the handler is held up by a map copy, not by sorting.
func (h *handler) checksum() string {
	return checksum(h.viewCopy())
}

func (h *handler) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.view)
}

// viewCopy is a copy of the view, taken under the lock.
func (h *handler) viewCopy() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.view)
}

func (h *handler) latencySamples() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.latencies)
}

// latency is the protocol's latency summary, in microseconds.
type latency struct {
	P50     int64 `json:"p50"`
	P99     int64 `json:"p99"`
	P999    int64 `json:"p999"`
	Max     int64 `json:"max"`
	Samples int   `json:"samples"`
}

// summarize takes nearest-rank percentiles of nanosecond samples.
func summarize(samplesNs []int64) *latency {
	if len(samplesNs) == 0 {
		return &latency{}
	}
	sorted := slices.Clone(samplesNs)
	slices.Sort(sorted)
	rank := func(permille int) int64 {
		// Nearest rank: the smallest sample with at least p of all samples at or below it.
		index := (permille*len(sorted)+999)/1000 - 1
		return max(sorted[max(index, 0)], 0) / 1000
	}
	return &latency{
		P50:     rank(500),
		P99:     rank(990),
		P999:    rank(999),
		Max:     max(sorted[len(sorted)-1], 0) / 1000,
		Samples: len(sorted),
	}
}
