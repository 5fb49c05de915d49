package fifopeer

import (
	"fmt"
	"reflect"
	"sort"
	"unsafe"

	"k8s.io/client-go/tools/cache"
)

// client-go v0.37 exposes neither the keys a queue holds nor a way to hand popped deltas back
// (ErrRequeue and AddIfNotPresent were removed upstream). The peer reads and writes the
// queues' unexported fields for those two observations only. Every access goes through field,
// which panics with the field's name if an upgrade renames it, so a silent drift is impossible.

func field(queue interface{}, name string) reflect.Value {
	v := reflect.ValueOf(queue).Elem()
	f := v.FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("%T has no field %q: client-go changed, update internals.go", queue, name))
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// queueKeys lists the distinct keys with something queued, sorted.
func (r *Runner) queueKeys() []string {
	keys := []string{}
	switch q := r.queue.(type) {
	case *cache.DeltaFIFO:
		keys = append(keys, field(q, "queue").Interface().([]string)...)
	case *cache.RealFIFO:
		seen := map[string]bool{}
		for _, d := range field(q, "items").Interface().([]cache.Delta) {
			if d.Type == cache.ReplacedAll || d.Type == cache.SyncAll || d.Type == cache.Bookmark {
				// Whole-queue events belong to no key.
				continue
			}
			key, err := deltaKey(d)
			if err != nil {
				panic(err)
			}
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	default:
		panic(fmt.Sprintf("unexpected queue %T", r.queue))
	}
	sort.Strings(keys)
	return keys
}

// requeue hands popped deltas back to the queue the way DeltaFIFO.Pop did with ErrRequeue
// before its removal (its addIfNotPresent): mark the queue populated and, unless
// the key has been queued again meanwhile, append the key at the back with the popped deltas.
// initialPopulationCount is not restored, exactly as upstream did not.
func (r *Runner) requeue(key string, deltas cache.Deltas) error {
	q, ok := r.queue.(*cache.DeltaFIFO)
	if !ok {
		return fmt.Errorf("the %s queue cannot requeue", r.kind)
	}
	field(q, "populated").SetBool(true)
	items := field(q, "items").Interface().(map[string]cache.Deltas)
	if _, exists := items[key]; exists {
		return nil
	}
	queue := field(q, "queue")
	queue.Set(reflect.Append(queue, reflect.ValueOf(key)))
	items[key] = deltas
	return nil
}
