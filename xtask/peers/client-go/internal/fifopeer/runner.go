package fifopeer

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/peers/client-go/internal/scriptobj"
)

// Runner holds the queue of the script being run. Feed it lines with Step; a "begin" line
// starts a new script and drops the previous one, so one process can run many scripts.
type Runner struct {
	step  int
	id    string
	kind  string
	queue cache.Queue
	// known is the consumer's store, which the queue consults as its KnownObjects; nil when
	// the script runs without one.
	known cache.Indexer
}

// Step runs one script line and returns its result.
func (r *Runner) Step(op Op) Result {
	if op.Op == "begin" {
		return r.begin(op)
	}
	if r.queue == nil {
		return Result{Op: op.Op, Error: "no script begun: the first line must be a begin line"}
	}
	r.step++
	res := Result{Step: r.step, Op: op.Op}
	var err error
	switch op.Op {
	case "add":
		err = withObject(op, r.queue.Add)
	case "update":
		err = withObject(op, r.queue.Update)
	case "delete":
		err = withObject(op, r.queue.Delete)
	case "replace":
		list := make([]interface{}, 0, len(op.Objects))
		for _, o := range op.Objects {
			list = append(list, scriptobj.Pod(o))
		}
		err = r.queue.Replace(list, op.ResourceVersion)
	case "resync":
		err = r.queue.Resync()
	case "bookmark":
		// Only the atomic RealFIFO takes bookmarks; the others have no Bookmark method, which
		// is client-go's way of ignoring them.
		if b, ok := r.queue.(cache.ReflectorBookmarkStore); ok {
			err = b.Bookmark(op.ResourceVersion)
		}
	case "pop":
		res.Popped, res.Empty, err = r.pop(op.Requeue)
	case "pop_batch":
		res.Popped, res.Empty, err = r.popBatch()
	case "drain":
		res.Drained, err = r.drain()
	case "list_keys":
		res.QueueKeys = r.queueKeys()
		if r.known != nil {
			res.KnownKeys = r.known.ListKeys()
			sort.Strings(res.KnownKeys)
		}
	case "has_synced":
	case "end":
		res.ID = r.id
	default:
		err = fmt.Errorf("unknown op %q", op.Op)
	}
	if err != nil {
		res.Error = err.Error()
	}
	res.HasSynced = r.queue.HasSynced()
	if op.Op == "end" {
		r.queue = nil
	}
	return res
}

// sortedKeys lists the known objects' keys in sorted order. The queues queue tombstones
// (Replace) and Sync deltas (Resync) in the order ListKeys gives, which for client-go's
// indexer is Go's random map order; sorting makes the pop order a function of the script, and
// the Rust side of the differential lists its known keys sorted as well.
type sortedKeys struct {
	cache.KeyListerGetter
}

func (s sortedKeys) ListKeys() []string {
	keys := s.KeyListerGetter.ListKeys()
	sort.Strings(keys)
	return keys
}

func withObject(op Op, apply func(interface{}) error) error {
	if op.Object == nil {
		return fmt.Errorf("%s needs an object", op.Op)
	}
	return apply(scriptobj.Pod(*op.Object))
}

func (r *Runner) begin(op Op) Result {
	r.step = 0
	r.id = op.ID
	r.kind = op.Queue
	r.queue = nil
	r.known = nil
	res := Result{Op: "begin", ID: op.ID}
	var knownObjects cache.KeyListerGetter
	if op.KnownObjects || op.AtomicEvents {
		r.known = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
	}
	if op.KnownObjects {
		knownObjects = sortedKeys{r.known}
	}
	switch {
	case op.Queue == "delta" && !op.AtomicEvents:
		r.queue = cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
			KeyFunction:           cache.MetaNamespaceKeyFunc,
			KnownObjects:          knownObjects,
			EmitDeltaTypeReplaced: op.EmitReplaced,
		})
	case op.Queue == "real" && op.AtomicEvents:
		if knownObjects != nil {
			// NewRealFIFOWithOptions panics on KnownObjects with AtomicEvents.
			res.Error = "the atomic real queue takes no known_objects"
			return res
		}
		// Today's informer default (AtomicFIFO and UnlockWhileProcessingFIFO). The consumer
		// still keeps a store; the queue does not consult it.
		r.queue = cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			KeyFunction:           cache.MetaNamespaceKeyFunc,
			AtomicEvents:          true,
			UnlockWhileProcessing: true,
			EmitDeltaTypeBookmark: true,
		})
	case op.Queue == "real":
		if knownObjects == nil {
			// NewRealFIFOWithOptions panics without KnownObjects unless AtomicEvents is set.
			res.Error = "the real queue needs known_objects unless atomic_events"
			return res
		}
		r.queue = cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
			KeyFunction:  cache.MetaNamespaceKeyFunc,
			KnownObjects: knownObjects,
		})
	default:
		res.Error = fmt.Sprintf("unknown queue %q (atomic_events %v)", op.Queue, op.AtomicEvents)
		return res
	}
	// Close does not gate Add/Update/Delete/Replace/Resync; it only makes Pop return
	// ErrFIFOClosed instead of blocking when the queue is empty. That is what lets a script pop
	// an empty queue deterministically.
	r.queue.Close()
	res.HasSynced = r.queue.HasSynced()
	return res
}

// process applies popped deltas to the consumer's store, as an informer's HandleDeltas does
// (controller.go processDeltas): Added, Updated, Replaced and Sync add or update, Deleted
// deletes (a tombstone by its recorded key), ReplacedAll replaces the whole store, SyncAll
// changes nothing in it, Bookmark records its resource version.
func (r *Runner) process(deltas []cache.Delta) error {
	if r.known == nil {
		return nil
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Added, cache.Updated, cache.Replaced, cache.Sync:
			if _, exists, err := r.known.Get(d.Object); err == nil && exists {
				if err := r.known.Update(d.Object); err != nil {
					return err
				}
			} else if err := r.known.Add(d.Object); err != nil {
				return err
			}
		case cache.Deleted:
			if err := r.known.Delete(d.Object); err != nil {
				return err
			}
		case cache.ReplacedAll:
			info := d.Object.(cache.ReplacedAllInfo)
			if err := r.known.Replace(info.Objects, info.ResourceVersion); err != nil {
				return err
			}
		case cache.SyncAll:
		case cache.Bookmark:
			r.known.Bookmark(d.Object.(cache.BookmarkInfo).ResourceVersion)
		default:
			return fmt.Errorf("unexpected delta type %s", d.Type)
		}
	}
	return nil
}

func (r *Runner) pop(requeue bool) (*Popped, bool, error) {
	var popped *Popped
	var requeueKey string
	var requeueDeltas cache.Deltas
	_, err := r.queue.Pop(func(obj interface{}, isInInitialList bool) error {
		deltas, ok := obj.(cache.Deltas)
		if !ok {
			return fmt.Errorf("pop gave %T, not Deltas", obj)
		}
		popped = &Popped{IsInInitialList: isInInitialList, Deltas: views(deltas), Requeued: requeue}
		if requeue {
			// A failed process leaves the consumer's store untouched and hands the deltas back.
			key, err := deltaKey(deltas[len(deltas)-1])
			if err != nil {
				return err
			}
			requeueKey, requeueDeltas = key, deltas
			return nil
		}
		return r.process(deltas)
	})
	if errors.Is(err, cache.ErrFIFOClosed) {
		return nil, true, nil
	}
	if err == nil && requeueDeltas != nil {
		err = r.requeue(requeueKey, requeueDeltas)
	}
	return popped, false, err
}

func (r *Runner) popBatch() (*Popped, bool, error) {
	batchQueue, ok := r.queue.(cache.QueueWithBatch)
	if !ok {
		return nil, false, fmt.Errorf("the %s queue does not pop batches", r.kind)
	}
	var popped *Popped
	processBatch := func(deltas []cache.Delta, isInInitialList bool) error {
		popped = &Popped{IsInInitialList: isInInitialList, Deltas: views(deltas)}
		return r.process(deltas)
	}
	processSingle := func(obj interface{}, isInInitialList bool) error {
		deltas, ok := obj.(cache.Deltas)
		if !ok {
			return fmt.Errorf("pop gave %T, not Deltas", obj)
		}
		return processBatch(deltas, isInInitialList)
	}
	err := batchQueue.PopBatch(processBatch, processSingle)
	if errors.Is(err, cache.ErrFIFOClosed) {
		return nil, true, nil
	}
	return popped, false, err
}

// drain pops (without requeue) until the queue is empty. A queue of n keys empties in at most
// n pops; the bound only guards against a queue that refills itself.
func (r *Runner) drain() ([]Popped, error) {
	drained := []Popped{}
	for i := 0; i < 100000; i++ {
		popped, empty, err := r.pop(false)
		if err != nil || empty {
			return drained, err
		}
		drained = append(drained, *popped)
	}
	return drained, errors.New("drain did not empty the queue")
}

func deltaKey(d cache.Delta) (string, error) {
	return cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
}

func views(deltas []cache.Delta) []DeltaView {
	out := make([]DeltaView, 0, len(deltas))
	for _, d := range deltas {
		v := DeltaView{Type: string(d.Type)}
		obj := d.Object
		switch info := obj.(type) {
		case cache.ReplacedAllInfo:
			v.ResourceVersion = info.ResourceVersion
			v.Objects = []ObjectView{}
			for _, o := range info.Objects {
				v.Objects = append(v.Objects, objectView(o))
			}
			out = append(out, v)
			continue
		case cache.SyncAllInfo:
			out = append(out, v)
			continue
		case cache.BookmarkInfo:
			v.ResourceVersion = info.ResourceVersion
			out = append(out, v)
			continue
		}
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			v.Tombstone = true
			v.Key = tombstone.Key
			obj = tombstone.Obj
		}
		if obj != nil {
			view := objectView(obj)
			if !v.Tombstone {
				v.Key = view.Key
			}
			v.Object = &view
		}
		out = append(out, v)
	}
	return out
}

func objectView(obj interface{}) ObjectView {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		panic(fmt.Sprintf("delta object is %T, not *v1.Pod", obj))
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		panic(err)
	}
	return ObjectView{Key: key, ResourceVersion: pod.ResourceVersion, Labels: pod.Labels}
}
