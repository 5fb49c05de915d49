// Package storepeer runs operation scripts against client-go's Indexer (cache.NewIndexer) and
// reports every observable result, so that kinformer-store's Cache can be checked against the
// same scripts (see ../../README.md for the format).
package storepeer

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/peers/client-go/internal/scriptobj"
)

// Object is the part of a Pod a script controls.
type Object = scriptobj.Object

// Op is one line of a script. Which fields matter depends on Op.Op.
type Op struct {
	Op              string   `json:"op"`
	ID              string   `json:"id,omitempty"`
	Object          *Object  `json:"object,omitempty"`
	Objects         []Object `json:"objects,omitempty"`
	ResourceVersion string   `json:"rv,omitempty"`
	Key             string   `json:"key,omitempty"`
	Index           string   `json:"index,omitempty"`
	Value           string   `json:"value,omitempty"`
}

// OpName names the line's operation.
func (op Op) OpName() string { return op.Op }

// ObjectView is what a result reports about a stored object.
type ObjectView struct {
	Key             string            `json:"key"`
	ResourceVersion string            `json:"rv,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// Result is one output line: one per input line.
type Result struct {
	Step  int    `json:"step"`
	Op    string `json:"op"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
	// Keys answers list_keys, index_keys, by_index and index (the keys of the objects found).
	Keys []string `json:"keys,omitempty"`
	// Values answers list_index_func_values.
	Values []string `json:"values,omitempty"`
	// Found answers get.
	Found *ObjectView `json:"found,omitempty"`
	// Snapshot answers snapshot: every object, and every index as value -> keys.
	Objects []ObjectView                   `json:"objects,omitempty"`
	Indices map[string]map[string][]string `json:"indices,omitempty"`
}

// IndexFuncs are the index functions a script can use, by name. Every store starts with all
// but the ones in Late, which a script adds with add_indexer.
var IndexFuncs = cache.Indexers{
	// The informers' namespace index.
	cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
	// Zero or more values: every label as key=value.
	"labels": func(obj interface{}) ([]string, error) {
		values := []string{}
		for k, v := range obj.(*corev1.Pod).Labels {
			values = append(values, k+"="+v)
		}
		return values, nil
	},
	// The app label, listed twice: index funcs may repeat a value.
	"app-twice": func(obj interface{}) ([]string, error) {
		if app, ok := obj.(*corev1.Pod).Labels["app"]; ok {
			return []string{app, app}, nil
		}
		return nil, nil
	},
	// The tier label; added mid-script.
	"tier": func(obj interface{}) ([]string, error) {
		if tier, ok := obj.(*corev1.Pod).Labels["tier"]; ok {
			return []string{tier}, nil
		}
		return nil, nil
	},
}

// Late are the index funcs a store does not start with.
var Late = map[string]bool{"tier": true}

// Runner holds the store of the script being run. A "begin" line starts a new script.
type Runner struct {
	step  int
	id    string
	store cache.Indexer
}

func view(obj interface{}) ObjectView {
	pod := obj.(*corev1.Pod)
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		panic(err)
	}
	return ObjectView{Key: key, ResourceVersion: pod.ResourceVersion, Labels: pod.Labels}
}

func keysOf(objs []interface{}) []string {
	keys := make([]string, 0, len(objs))
	for _, obj := range objs {
		keys = append(keys, view(obj).Key)
	}
	sort.Strings(keys)
	return keys
}

func sorted(values []string) []string {
	sort.Strings(values)
	return values
}

// Step runs one script line and returns its result.
func (r *Runner) Step(op Op) Result {
	if op.Op == "begin" {
		r.step = 0
		r.id = op.ID
		initial := cache.Indexers{}
		for name, f := range IndexFuncs {
			if !Late[name] {
				initial[name] = f
			}
		}
		r.store = cache.NewIndexer(cache.MetaNamespaceKeyFunc, initial)
		return Result{Op: "begin", ID: op.ID}
	}
	if r.store == nil {
		return Result{Op: op.Op, Error: "no script begun: the first line must be a begin line"}
	}
	r.step++
	res := Result{Step: r.step, Op: op.Op}
	var err error
	object := func() interface{} {
		if op.Object == nil {
			panic(fmt.Sprintf("%s needs an object", op.Op))
		}
		return scriptobj.Pod(*op.Object)
	}
	switch op.Op {
	case "add":
		err = r.store.Add(object())
	case "update":
		err = r.store.Update(object())
	case "delete":
		err = r.store.Delete(object())
	case "replace":
		list := make([]interface{}, 0, len(op.Objects))
		for _, o := range op.Objects {
			list = append(list, scriptobj.Pod(o))
		}
		err = r.store.Replace(list, op.ResourceVersion)
	case "get":
		var obj interface{}
		var exists bool
		obj, exists, err = r.store.GetByKey(op.Key)
		if exists {
			found := view(obj)
			res.Found = &found
		}
	case "list_keys":
		res.Keys = sorted(r.store.ListKeys())
	case "by_index":
		var objs []interface{}
		objs, err = r.store.ByIndex(op.Index, op.Value)
		res.Keys = keysOf(objs)
	case "index_keys":
		res.Keys, err = r.store.IndexKeys(op.Index, op.Value)
		sort.Strings(res.Keys)
	case "index":
		var objs []interface{}
		objs, err = r.store.Index(op.Index, object())
		res.Keys = keysOf(objs)
	case "list_index_func_values":
		res.Values = sorted(r.store.ListIndexFuncValues(op.Index))
	case "add_indexer":
		f, ok := IndexFuncs[op.Index]
		if !ok {
			err = fmt.Errorf("no index func named %q", op.Index)
			break
		}
		err = r.store.AddIndexers(cache.Indexers{op.Index: f})
	case "snapshot":
		r.snapshot(&res)
	case "end":
		res.ID = r.id
		r.store = nil
	default:
		err = fmt.Errorf("unknown op %q", op.Op)
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func (r *Runner) snapshot(res *Result) {
	for _, obj := range r.store.List() {
		res.Objects = append(res.Objects, view(obj))
	}
	sort.Slice(res.Objects, func(i, j int) bool { return res.Objects[i].Key < res.Objects[j].Key })
	res.Indices = map[string]map[string][]string{}
	for name := range r.store.GetIndexers() {
		values := map[string][]string{}
		for _, value := range r.store.ListIndexFuncValues(name) {
			keys, err := r.store.IndexKeys(name, value)
			if err != nil {
				panic(err)
			}
			values[value] = sorted(keys)
		}
		res.Indices[name] = values
	}
}
