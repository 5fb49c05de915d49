// Command informer-peer runs a real client-go SharedInformerFactory (Pods and ConfigMaps, no
// resync) against the cluster of a kubeconfig and reports what it sees as JSON lines on stdout:
//
//	{"event":"ADD","resource":"pods","key":"ns/a","rv":"5","initial":true}
//	{"event":"UPDATE","resource":"pods","key":"ns/a","old_rv":"5","rv":"9"}
//	{"event":"DELETE","resource":"pods","key":"ns/a","rv":"9","tombstone":false}
//	{"synced":true,"pods":3,"configmaps":2}
//	{"final":{"pods":[{"key":"ns/a","rv":"9"}],"configmaps":[...]}}
//
// "synced" follows WaitForCacheSync; "final" is the listers' contents (keys sorted), printed
// when stdin closes or -duration passes, after which the program exits. A delete's "rv" is the
// last state the informer knew; "tombstone" says it came as a cache.DeletedFinalStateUnknown
// (the object vanished while the watch was down and a relist found it gone).
//
// -protobuf asks for protobuf first with JSON as the fallback, as kube-controller-manager does
// (client-go's own default is JSON only).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

type output struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *output) emit(line any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.enc.Encode(line); err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: writing stdout: %v\n", err)
		os.Exit(1)
	}
}

type event struct {
	Event     string `json:"event"`
	Resource  string `json:"resource"`
	Key       string `json:"key"`
	RV        string `json:"rv"`
	OldRV     string `json:"old_rv,omitempty"`
	Initial   *bool  `json:"initial,omitempty"`
	Tombstone *bool  `json:"tombstone,omitempty"`
}

type entry struct {
	Key string `json:"key"`
	RV  string `json:"rv"`
}

func keyAndRV(obj any) (string, string) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: no key for %T: %v\n", obj, err)
		os.Exit(1)
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: no metadata on %T: %v\n", obj, err)
		os.Exit(1)
	}
	return key, accessor.GetResourceVersion()
}

func handler(out *output, resource string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			key, rv := keyAndRV(obj)
			out.emit(event{Event: "ADD", Resource: resource, Key: key, RV: rv, Initial: &isInInitialList})
		},
		UpdateFunc: func(oldObj, newObj any) {
			_, oldRV := keyAndRV(oldObj)
			key, rv := keyAndRV(newObj)
			out.emit(event{Event: "UPDATE", Resource: resource, Key: key, RV: rv, OldRV: oldRV})
		},
		DeleteFunc: func(obj any) {
			tombstone := false
			if unknown, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				tombstone = true
				_, rv := keyAndRV(unknown.Obj)
				out.emit(event{Event: "DELETE", Resource: resource, Key: unknown.Key, RV: rv, Tombstone: &tombstone})
				return
			}
			key, rv := keyAndRV(obj)
			out.emit(event{Event: "DELETE", Resource: resource, Key: key, RV: rv, Tombstone: &tombstone})
		},
	}
}

func entries[T any](objects []T) []entry {
	listed := make([]entry, 0, len(objects))
	for _, obj := range objects {
		key, rv := keyAndRV(obj)
		listed = append(listed, entry{Key: key, RV: rv})
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].Key < listed[j].Key })
	return listed
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path of the kubeconfig to use (required)")
	duration := flag.Duration("duration", 0, "stop after this long even if stdin stays open (0: only on stdin EOF)")
	protobuf := flag.Bool("protobuf", false, "prefer protobuf, falling back to JSON")
	// klog's flags (-v=4 shows the reflector's relists and expired watches on stderr).
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "informer-peer: -kubeconfig is required")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: loading %s: %v\n", *kubeconfig, err)
		os.Exit(2)
	}
	if *protobuf {
		config.ContentType = "application/vnd.kubernetes.protobuf"
		config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: building the clientset: %v\n", err)
		os.Exit(2)
	}

	out := &output{enc: json.NewEncoder(os.Stdout)}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	configMaps := factory.Core().V1().ConfigMaps()
	if _, err := pods.Informer().AddEventHandler(handler(out, "pods")); err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: adding the pod handler: %v\n", err)
		os.Exit(2)
	}
	if _, err := configMaps.Informer().AddEventHandler(handler(out, "configmaps")); err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: adding the configmap handler: %v\n", err)
		os.Exit(2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	allSynced := true
	for _, ok := range synced {
		allSynced = allSynced && ok
	}
	podList, err := pods.Lister().List(labels.Everything())
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: listing pods: %v\n", err)
		os.Exit(1)
	}
	configMapList, err := configMaps.Lister().List(labels.Everything())
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: listing configmaps: %v\n", err)
		os.Exit(1)
	}
	out.emit(map[string]any{"synced": allSynced, "pods": len(podList), "configmaps": len(configMapList)})

	stop := make(chan struct{})
	go func() {
		// Whatever arrives on stdin is ignored: only its end matters.
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	if *duration > 0 {
		select {
		case <-stop:
		case <-time.After(*duration):
		}
	} else {
		<-stop
	}

	podList, err = pods.Lister().List(labels.Everything())
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: listing pods: %v\n", err)
		os.Exit(1)
	}
	configMapList, err = configMaps.Lister().List(labels.Everything())
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-peer: listing configmaps: %v\n", err)
		os.Exit(1)
	}
	out.emit(map[string]any{"final": map[string]any{
		"pods":       entries(podList),
		"configmaps": entries(configMapList),
	}})
	cancel()
	factory.Shutdown()
}
