package peers

// The client-go side of `cargo xtask bench store`. Each sub-benchmark carries the ID of its
// counterpart in crates/store/benches/store.rs without the candidate suffix: the Rust side's
// "get-by-key/slot-table" (the shipped Cache) is "BenchmarkStore/get-by-key" here.
// The Rust bench calls its Cache through the Store and CacheReader traits, so this side calls
// the Indexer cache.NewIndexer makes with MetaNamespaceKeyFunc: both key every write (add,
// update, delete, replace) with that key func, and both look objects up by precomputed key.

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const (
	storePods       = 100_000
	storeNamespaces = 100
	storeApps       = 50
	storeAppIndex   = "app"
)

// storePod is store.rs's pod(index, app): a Deployment-shaped Pod with a generated name, a uid,
// a resourceVersion, the labels app, pod-template-hash and tier, and one container.
func storePod(index, app int) *corev1.Pod {
	appName := fmt.Sprintf("app-%02d", app)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("%s-%010x-%05d", appName, app*7919, index),
			Namespace:       fmt.Sprintf("team-%03d", index%storeNamespaces),
			UID:             types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", index)),
			ResourceVersion: fmt.Sprintf("%d", 1_000_000+index),
			Labels: map[string]string{
				"app":               appName,
				"pod-template-hash": fmt.Sprintf("%010x", app*7919),
				"tier":              []string{"web", "api", "db"}[app%3],
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  appName,
				Image: fmt.Sprintf("registry.example/%s:1.0", appName),
			}},
		},
	}
}

func storeIndexers() cache.Indexers {
	return cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		storeAppIndex: func(obj interface{}) ([]string, error) {
			if app, ok := obj.(*corev1.Pod).Labels["app"]; ok {
				return []string{app}, nil
			}
			return nil, nil
		},
	}
}

// storeFixture is store.rs's Fixture: keys, Pods, and the same Pods moved to the next app.
type storeFixture struct {
	keys  []string
	pods  []*corev1.Pod
	moved []*corev1.Pod
}

func newStoreFixture(b *testing.B) storeFixture {
	f := storeFixture{
		keys:  make([]string, storePods),
		pods:  make([]*corev1.Pod, storePods),
		moved: make([]*corev1.Pod, storePods),
	}
	for i := range storePods {
		f.pods[i] = storePod(i, i%storeApps)
		f.moved[i] = storePod(i, (i+1)%storeApps)
		key, err := cache.MetaNamespaceKeyFunc(f.pods[i])
		mustNil(b, err)
		f.keys[i] = key
	}
	return f
}

// list is the fixture's Pods as the list an Indexer's Replace takes; it keys them into a map
// of its own, so one list serves every Replace.
func (f storeFixture) list() []interface{} {
	list := make([]interface{}, storePods)
	for i, pod := range f.pods {
		list[i] = pod
	}
	return list
}

// backgroundWriter is store.rs's BackgroundWriter: one goroutine re-adding Pods as fast as it
// can, alternating between the two app labels so every write moves an index entry. The
// returned func stops it and waits for it to exit.
func backgroundWriter(store cache.Indexer, f storeFixture) (stop func()) {
	var stopping atomic.Bool
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		j := 0
		for !stopping.Load() {
			j = (j + 104_729) % storePods
			pod := f.pods[j]
			if j%2 == 0 {
				pod = f.moved[j]
			}
			// Every fixture Pod has a name: the key func cannot fail.
			_ = store.Update(pod)
		}
	}()
	return func() {
		stopping.Store(true)
		<-exited
	}
}

// BenchmarkStore runs crates/store/benches/store.rs's scenarios on one store filled with the
// fixture's 100,000 Pods, in the same order (each scenario leaves the store as the next expects).
func BenchmarkStore(b *testing.B) {
	f := newStoreFixture(b)
	namespaces := make([]string, storeNamespaces)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("team-%03d", i)
	}
	apps := make([]string, storeApps)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%02d", i)
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, storeIndexers())
	list := f.list()
	mustNil(b, store.Replace(list, "1"))
	i := 0
	sink := 0

	b.Run("update-same-index-values", func(b *testing.B) {
		for b.Loop() {
			i = (i + 7919) % storePods
			mustNil(b, store.Update(f.pods[i]))
		}
	})
	b.Run("update-moving-app-label", func(b *testing.B) {
		flip := false
		for b.Loop() {
			i = (i + 7919) % storePods
			flip = !flip
			pod := f.pods[i]
			if flip {
				pod = f.moved[i]
			}
			mustNil(b, store.Update(pod))
		}
	})
	b.Run("delete-then-add", func(b *testing.B) {
		for b.Loop() {
			i = (i + 7919) % storePods
			mustNil(b, store.Delete(f.pods[i]))
			mustNil(b, store.Add(f.pods[i]))
		}
	})
	getByKey := func(b *testing.B) {
		for b.Loop() {
			i = (i + 7919) % storePods
			if _, ok, _ := store.GetByKey(f.keys[i]); ok {
				sink++
			}
		}
	}
	byNamespace := func(b *testing.B) {
		for b.Loop() {
			i = (i + 1) % storeNamespaces
			found, err := store.ByIndex(cache.NamespaceIndex, namespaces[i])
			mustNil(b, err)
			sink += len(found)
		}
	}
	b.Run("get-by-key", getByKey)
	b.Run("by-index-namespace-1000", byNamespace)
	b.Run("by-index-app-2000", func(b *testing.B) {
		for b.Loop() {
			i = (i + 1) % storeApps
			found, err := store.ByIndex(storeAppIndex, apps[i])
			mustNil(b, err)
			sink += len(found)
		}
	})
	b.Run("list-100k", func(b *testing.B) {
		for b.Loop() {
			sink += len(store.List())
		}
	})
	b.Run("replace-100k", func(b *testing.B) {
		for b.Loop() {
			mustNil(b, store.Replace(list, "2"))
		}
	})

	// As in store.rs, on two shared cores these price lock hand-off more than parallelism.
	b.Run("get-by-key-with-writer", func(b *testing.B) {
		defer backgroundWriter(store, f)()
		getByKey(b)
	})
	b.Run("by-index-namespace-with-writer", func(b *testing.B) {
		defer backgroundWriter(store, f)()
		byNamespace(b)
	})
	if sink == 0 {
		b.Fatal("no benchmark found anything")
	}
}
