// Command bench-peer is client-go's side of `cargo xtask bench`: it runs one scenario of
// xtask/peers/BENCH-PROTOCOL.md with a client-go v0.37.2 SharedInformerFactory (resync 0), as a
// user would, and prints the result as the last line of stdout.
//
//	bench-peer --scenario NAME --kubeconfig PATH [--n N] [--mode MODE] [--count C] [--rate S]
//	           [--readers R] [--handlers H] [--fraction F]
//
// Scenarios: sync-pods, sync-configmaps, watch, fanout, relist, lookups, memory, sync-real.
// --mode is json (the default) or protobuf (protobuf preferred, JSON as the fallback); with
// memory it is full (the default) or stripped (managedFields cleared by SetTransform), both
// JSON, or metadata (a metadatainformer, whose client asks for protobuf first). --n is the number of objects the harness seeded: a view of
// another size after sync is reported on stderr. Progress goes to stderr.
//
// Two readings of the protocol: fanout's handler 0 sleeps from the start of the update phase
// on, not during the initial sync (which would then time 1 ms per seeded object, not the
// informer); and latency is sampled only within a phase, because a server shared by several
// runs lists objects still annotated by an earlier run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

const (
	// settleTime passes between sync and the steady memory reading.
	settleTime = 2 * time.Second
	// syncLimit bounds the initial sync, relistLimit the relist phase (the protocol's 120 s),
	// phaseLimit the other phases.
	syncLimit   = 10 * time.Minute
	relistLimit = 120 * time.Second
	phaseLimit  = 10 * time.Minute
	// relistPoll is how often the relist phase compares handler 0's view with the server.
	relistPoll = 100 * time.Millisecond
	// slowHandlerDelay is what fanout's handler 0 spends on every call of the phase.
	slowHandlerDelay = time.Millisecond
	// namespaces is fixtures::NAMESPACES, the spread of the seeded objects.
	namespaces = 10
	// apps is the number of distinct app.kubernetes.io/name labels of the seeded objects.
	apps = 20
	// appLabel is the label the lookups scenario indexes.
	appLabel = "app.kubernetes.io/name"
)

type options struct {
	scenario   string
	kubeconfig string
	n          int
	mode       string
	count      int
	rate       int
	readers    int
	handlers   int
	fraction   float64
}

// scenario is what a scenario needs of the informer.
type scenario struct {
	resource string
	handlers int
	// memory scenarios take full|stripped|metadata as their mode, the others json|protobuf.
	memory bool
}

var scenarios = map[string]scenario{
	"sync-pods":       {resource: "pods", handlers: 1},
	"sync-configmaps": {resource: "configmaps", handlers: 1},
	"watch":           {resource: "pods", handlers: 3},
	"fanout":          {resource: "pods", handlers: 10},
	"relist":          {resource: "pods", handlers: 1},
	"lookups":         {resource: "pods", handlers: 1},
	"memory":          {resource: "pods", handlers: 1, memory: true},
	"sync-real":       {resource: "pods", handlers: 1},
}

// result is the protocol's result line; fields a scenario does not measure are left out.
type result struct {
	Peer           string         `json:"peer"`
	Mode           string         `json:"mode"`
	Scenario       string         `json:"scenario"`
	Objects        int            `json:"objects"`
	SyncMs         int64          `json:"sync_ms"`
	CPUMs          int64          `json:"cpu_ms"`
	SysMs          int64          `json:"sys_ms"`
	Faults         int64          `json:"faults"`
	PeakRSSKiB     int64          `json:"peak_rss_kib"`
	BaselineRSSKiB int64          `json:"baseline_rss_kib"`
	SteadyRSSKiB   int64          `json:"steady_rss_kib"`
	Events         uint64         `json:"events"`
	Checksum       string         `json:"checksum"`
	ViewsAgree     bool           `json:"views_agree"`
	ContentTypes   map[string]int `json:"content_types"`

	PhaseMs          *int64   `json:"phase_ms,omitempty"`
	PhaseCPUMs       *int64   `json:"phase_cpu_ms,omitempty"`
	PhaseSysMs       *int64   `json:"phase_sys_ms,omitempty"`
	PhaseFaults      *int64   `json:"phase_faults,omitempty"`
	LatencyUs        *latency `json:"latency_us,omitempty"`
	SlowLatencyUs    *latency `json:"slow_latency_us,omitempty"`
	RelistPeakRSSKiB *int64   `json:"relist_peak_rss_kib,omitempty"`
	RelistUpdates    *uint64  `json:"relist_updates,omitempty"`
	RelistDeletes    *uint64  `json:"relist_deletes,omitempty"`
	Reads            *uint64  `json:"reads,omitempty"`
	ReadsPerS        *int64   `json:"reads_per_s,omitempty"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-peer: "+format+"\n", args...)
	os.Exit(1)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-peer: "+format+"\n", args...)
}

func parseOptions() (options, scenario) {
	var opts options
	flag.StringVar(&opts.scenario, "scenario", "", "the scenario to run (required)")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "path of the kubeconfig to use (required)")
	flag.IntVar(&opts.n, "n", 0, "objects the harness seeded (0: unknown)")
	flag.StringVar(&opts.mode, "mode", "", "json|protobuf, or full|stripped|metadata for memory")
	flag.IntVar(&opts.count, "count", 10000, "updates the phase asks the server for")
	flag.IntVar(&opts.rate, "rate", 0, "updates per second (0: as fast as the server can); watch always uses 0")
	flag.IntVar(&opts.readers, "readers", 2, "lookups: reader goroutines (0: writes only)")
	flag.IntVar(&opts.handlers, "handlers", 0, "handlers (0: the scenario's own number)")
	flag.Float64Var(&opts.fraction, "fraction", 0.1, "relist: the fraction of objects changed")
	// klog's flags (-v=4 shows the reflector's relists and expired watches on stderr).
	klog.InitFlags(nil)
	flag.Parse()

	usage := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench-peer: "+format+"\n", args...)
		flag.Usage()
		os.Exit(2)
	}
	spec, ok := scenarios[opts.scenario]
	if !ok {
		usage("unknown --scenario %q", opts.scenario)
	}
	if opts.kubeconfig == "" {
		usage("--kubeconfig is required")
	}
	if spec.memory {
		if opts.mode == "" {
			opts.mode = "full"
		}
		if !slices.Contains([]string{"full", "stripped", "metadata"}, opts.mode) {
			usage("memory takes --mode full, stripped or metadata, not %q", opts.mode)
		}
	} else {
		if opts.mode == "" {
			opts.mode = "json"
		}
		if !slices.Contains([]string{"json", "protobuf"}, opts.mode) {
			usage("%s takes --mode json or protobuf, not %q", opts.scenario, opts.mode)
		}
	}
	if opts.handlers == 0 {
		opts.handlers = spec.handlers
	}
	if opts.handlers < 1 || (opts.scenario == "fanout" && opts.handlers < 2) {
		usage("--handlers %d is too few for %s", opts.handlers, opts.scenario)
	}
	if opts.count < 0 || opts.rate < 0 || opts.readers < 0 {
		usage("--count, --rate and --readers must not be negative")
	}
	if opts.fraction <= 0 || opts.fraction > 1 {
		usage("--fraction must be in (0, 1], not %v", opts.fraction)
	}
	return opts, spec
}

// informerUnderTest is the one informer a run uses, whichever factory built it.
type informerUnderTest struct {
	informer cache.SharedIndexInformer
	start    func(ctx context.Context)
	// waitSynced is the factory's own wait; registrations are waited for separately.
	waitSynced func(ctx context.Context) bool
}

func buildInformer(opts options, spec scenario, config *rest.Config) informerUnderTest {
	if opts.mode == "metadata" {
		client, err := metadata.NewForConfig(config)
		if err != nil {
			fail("building the metadata client: %v", err)
		}
		factory := metadatainformer.NewSharedInformerFactory(client, 0)
		informer := factory.ForResource(corev1.SchemeGroupVersion.WithResource(spec.resource)).Informer()
		return informerUnderTest{
			informer: informer,
			start:    func(ctx context.Context) { factory.Start(ctx.Done()) },
			// The metadata factory's WaitForCacheSync polls every 100 ms; the informer's
			// checker is what the typed factory waits on, without polling.
			waitSynced: func(ctx context.Context) bool {
				return cache.WaitFor(ctx, "", informer.HasSyncedChecker())
			},
		}
	}

	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail("building the clientset: %v", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	var informer cache.SharedIndexInformer
	switch spec.resource {
	case "pods":
		informer = factory.Core().V1().Pods().Informer()
	case "configmaps":
		informer = factory.Core().V1().ConfigMaps().Informer()
	default:
		fail("no informer for %s", spec.resource)
	}
	if opts.mode == "stripped" {
		err := informer.SetTransform(func(obj any) (any, error) {
			if object, ok := obj.(metav1.Object); ok {
				object.SetManagedFields(nil)
			}
			return obj, nil
		})
		if err != nil {
			fail("setting the transform: %v", err)
		}
	}
	return informerUnderTest{
		informer: informer,
		start:    factory.StartWithContext,
		waitSynced: func(ctx context.Context) bool {
			for informerType, synced := range factory.WaitForCacheSyncWithContext(ctx).Synced {
				if !synced {
					progress("%v did not sync", informerType)
					return false
				}
			}
			return true
		},
	}
}

func loadConfig(opts options, counter *contentTypeCounter) *rest.Config {
	config, err := clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
	if err != nil {
		fail("loading %s: %v", opts.kubeconfig, err)
	}
	if opts.mode == "protobuf" {
		config.ContentType = "application/vnd.kubernetes.protobuf"
		config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	} else {
		config.ContentType = "application/json"
	}
	config.WrapTransport = counter.wrap
	return config
}

func main() {
	opts, spec := parseOptions()
	counter := &contentTypeCounter{counts: map[string]int{}}
	config := loadConfig(opts, counter)
	under := buildInformer(opts, spec, config)
	if opts.scenario == "lookups" {
		// The factory's informers come with cache.NamespaceIndex (MetaNamespaceIndexFunc)
		// already; adding it again is a conflict.
		err := under.informer.AddIndexers(cache.Indexers{appLabel: appIndexFunc})
		if err != nil {
			fail("adding the indexers: %v", err)
		}
	}
	handlers := make([]*handler, opts.handlers)
	registrations := make([]cache.DoneChecker, opts.handlers)
	for i := range handlers {
		handlers[i] = newHandler(opts.n)
		registration, err := under.informer.AddEventHandler(handlers[i].funcs())
		if err != nil {
			fail("adding handler %d: %v", i, err)
		}
		registrations[i] = registration.HasSyncedChecker()
	}
	runtime.GC()
	debug.FreeOSMemory()
	out := result{
		Peer:           "client-go",
		Mode:           opts.mode,
		Scenario:       opts.scenario,
		BaselineRSSKiB: rssKiB(),
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := time.Now()
	under.start(ctx)
	syncCtx, syncCancel := context.WithTimeout(ctx, syncLimit)
	synced := under.waitSynced(syncCtx) && cache.WaitFor(syncCtx, "", registrations...)
	syncCancel()
	if !synced {
		fail("not synced after %v", syncLimit)
	}
	out.SyncMs = time.Since(started).Milliseconds()
	objects := handlers[0].size()
	progress("%s: synced %d %s in %d ms", opts.scenario, objects, spec.resource, out.SyncMs)
	if opts.n > 0 && objects != opts.n {
		progress("--n is %d but handler 0 has %d objects after sync (earlier runs' sentinels?)", opts.n, objects)
	}
	out.SteadyRSSKiB = settledRSSKiB(settleTime)
	var heap runtime.MemStats
	runtime.ReadMemStats(&heap)
	progress("steady: VmRSS %d KiB, live Go heap %d KiB", out.SteadyRSSKiB, heap.HeapAlloc/1024)

	admin := newAdmin(config.Host)
	switch opts.scenario {
	case "watch":
		// The protocol runs watch as fast as the server can, whatever --rate says.
		runUpdatePhase(&out, admin, spec, opts.count, 0, handlers, nil)
		out.LatencyUs = summarize(allLatencies(handlers))
	case "fanout":
		slow, fast := handlers[0], handlers[1:]
		begin := func() { slow.slow.Store(true) }
		runUpdatePhase(&out, admin, spec, opts.count, opts.rate, handlers, begin)
		out.LatencyUs = summarize(allLatencies(fast))
		out.SlowLatencyUs = summarize(slow.latencySamples())
	case "lookups":
		runLookups(&out, admin, spec, opts, under.informer.GetIndexer(), handlers)
	case "relist":
		runRelist(&out, admin, spec, opts, handlers[0])
	}

	used := readUsage()
	out.CPUMs, out.SysMs, out.Faults = used.cpuMs, used.sysMs, used.faults
	out.PeakRSSKiB = max(out.PeakRSSKiB, peakRSSKiB())
	first := handlers[0].viewCopy()
	out.Objects = len(first)
	out.Checksum = checksum(first)
	out.ViewsAgree = true
	for _, other := range handlers[1:] {
		if !maps.Equal(first, other.viewCopy()) {
			out.ViewsAgree = false
		}
	}
	for _, h := range handlers {
		out.Events += h.counts().total()
	}
	out.ContentTypes = counter.snapshot()

	line, err := json.Marshal(out)
	if err != nil {
		fail("encoding the result: %v", err)
	}
	fmt.Println(string(line))
	cancel()
}

func appIndexFunc(obj any) ([]string, error) {
	object, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	if app, ok := object.GetLabels()[appLabel]; ok {
		return []string{app}, nil
	}
	return nil, nil
}

func allLatencies(handlers []*handler) []int64 {
	var samples []int64
	for _, h := range handlers {
		samples = append(samples, h.latencySamples()...)
	}
	return samples
}

// phaseClock measures a phase's wall time, CPU and page faults from the admin call on.
type phaseClock struct {
	wall time.Time
	used usage
}

func startPhaseClock() phaseClock {
	return phaseClock{wall: time.Now(), used: readUsage()}
}

func (c phaseClock) stop(out *result) time.Duration {
	elapsed := time.Since(c.wall)
	wall := elapsed.Milliseconds()
	used := readUsage().since(c.used)
	out.PhaseMs = &wall
	out.PhaseCPUMs, out.PhaseSysMs, out.PhaseFaults = &used.cpuMs, &used.sysMs, &used.faults
	return elapsed
}

// runUpdatePhase asks for count updates and waits until every handler has seen the sentinel.
// begin runs right before the admin call.
func runUpdatePhase(out *result, admin *admin, spec scenario, count, rate int, handlers []*handler, begin func()) time.Duration {
	if begin != nil {
		begin()
	}
	for _, h := range handlers {
		h.sampling.Store(true)
	}
	clock := startPhaseClock()
	started := admin.update(spec.resource, count, rate)
	progress("update count=%d rate=%d started, sentinel %s", count, rate, started.Sentinel)
	deadline := clock.wall.Add(phaseLimit)
	for i, h := range handlers {
		if !h.waitSentinel(started.Sentinel, deadline) {
			fail("handler %d did not see the sentinel %s within %v", i, started.Sentinel, phaseLimit)
		}
	}
	elapsed := clock.stop(out)
	progress("every handler saw %s after %d ms", started.Sentinel, elapsed.Milliseconds())
	return elapsed
}

// runLookups reads the indexes from opts.readers goroutines while an update phase runs.
func runLookups(out *result, admin *admin, spec scenario, opts options, indexer cache.Indexer, handlers []*handler) {
	// Index values are built once, so readers measure lookups, not string formatting.
	namespaceValues := make([]string, namespaces)
	for i := range namespaceValues {
		namespaceValues[i] = fmt.Sprintf("ns-%d", i)
	}
	appValues := make([]string, apps)
	for i := range appValues {
		appValues[i] = fmt.Sprintf("app-%d", i)
	}

	var stop atomic.Bool
	var reads, found atomic.Uint64
	var readers sync.WaitGroup
	for reader := range opts.readers {
		readers.Go(func() {
			var myReads, myFound uint64
			// Readers start at different points of the cycle so they do not read in lockstep.
			for i := reader; !stop.Load(); i++ {
				var objects []any
				var err error
				if i%2 == 0 {
					objects, err = indexer.ByIndex(cache.NamespaceIndex, namespaceValues[i%namespaces])
				} else {
					objects, err = indexer.ByIndex(appLabel, appValues[i%apps])
				}
				if err != nil {
					fail("lookup: %v", err)
				}
				myReads++
				myFound += uint64(len(objects))
			}
			reads.Add(myReads)
			found.Add(myFound)
		})
	}
	elapsed := runUpdatePhase(out, admin, spec, opts.count, opts.rate, handlers, nil)
	stop.Store(true)
	readers.Wait()
	total := reads.Load()
	perSecond := int64(float64(total) / elapsed.Seconds())
	out.Reads, out.ReadsPerS = &total, &perSecond
	out.LatencyUs = summarize(allLatencies(handlers))
	progress("%d lookups returned %d objects", total, found.Load())
}

// runRelist forces a relist with changes and waits until handler 0's view matches the server.
func runRelist(out *result, admin *admin, spec scenario, opts options, first *handler) {
	out.PeakRSSKiB = peakRSSKiB()
	resetPeakRSS()
	before := first.counts()
	clock := startPhaseClock()
	started := admin.relist(spec.resource, opts.fraction)
	progress("relist fraction=%v: %d updated, %d deleted, sentinel %s",
		opts.fraction, started.Updated, started.Deleted, started.Sentinel)
	// The call is atomic: nothing changes the server's objects after it.
	want := admin.checksum(spec.resource)
	deadline := clock.wall.Add(relistLimit)
	ticker := time.NewTicker(relistPoll)
	defer ticker.Stop()
	for {
		// The sentinel arrives with the relist; only then can the view be complete, so the
		// checksum is not computed before.
		if first.hasSentinel(started.Sentinel) && first.checksum() == want.Checksum {
			break
		}
		if time.Now().After(deadline) {
			fail("handler 0's view (%s) did not reach the server's checksum %s (%d objects) within %v",
				first.checksum(), want.Checksum, want.Count, relistLimit)
		}
		<-ticker.C
	}
	elapsed := clock.stop(out)
	relistPeak := peakRSSKiB()
	after := first.counts()
	updates, deletes := after.updates-before.updates, after.deletes-before.deletes
	out.RelistPeakRSSKiB, out.RelistUpdates, out.RelistDeletes = &relistPeak, &updates, &deletes
	progress("handler 0 matched the server after %d ms: %d updates, %d deletes",
		elapsed.Milliseconds(), updates, deletes)
}
