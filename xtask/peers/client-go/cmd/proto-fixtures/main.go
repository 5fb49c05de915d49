// Command proto-fixtures writes the protobuf kube-apiserver sends for the JSON fixtures in a
// directory, as client-go v0.37 encodes it, and proves client-go reads each one back equal.
//
//	go run ./cmd/proto-fixtures DIR
//
// DIR/NAME.json holds one object (a list kind such as PodList included), with apiVersion and
// kind. It is decoded with client-go's scheme by a strict JSON serializer (an unknown or
// duplicated field fails), encoded as a GET response body is, by the protobuf serializer
// behind the scheme's codec factory for the object's group version (`k8s\0`, then a
// runtime.Unknown holding apiVersion, kind and the message), and written to DIR/NAME.pb.
//
// DIR/NAME.watch.jsonl holds one watch event per line, {"type": "ADDED", "object": {...}},
// every object of one group version. DIR/NAME.watch.pb gets the byte stream a protobuf watch
// returns, built as k8s.io/apiserver/pkg/endpoints/handlers (watch.go, response.go) builds it:
// each object encoded by the full protobuf serializer, wrapped in a metav1.WatchEvent as
// object.raw, the event encoded by the stream (raw, envelope-free) serializer, and each event
// framed by the length-delimited framer (a 4-byte big-endian length, then the event).
//
// Every output is decoded back the way client-go's REST client does (a client negotiator over
// scheme.Codecs.WithoutConversion(), and k8s.io/client-go/rest/watch's decoder over the
// framed stream) and compared with the JSON input by apiequality.Semantic.DeepEqual. Any
// mismatch fails the run before anything is written.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: proto-fixtures DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "proto-fixtures: %v\n", err)
		os.Exit(1)
	}
}

// output is one file to write, once every fixture has passed.
type output struct {
	path string
	data []byte
}

func run(dir string) error {
	c, err := newCodecs()
	if err != nil {
		return err
	}
	objects, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	watches, err := filepath.Glob(filepath.Join(dir, "*.watch.jsonl"))
	if err != nil {
		return err
	}
	if len(objects)+len(watches) == 0 {
		return fmt.Errorf("no *.json or *.watch.jsonl fixtures in %s", dir)
	}

	var outputs []output
	for _, path := range objects {
		data, err := c.object(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		outputs = append(outputs, output{strings.TrimSuffix(path, ".json") + ".pb", data})
	}
	for _, path := range watches {
		data, err := c.watch(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		outputs = append(outputs, output{strings.TrimSuffix(path, ".jsonl") + ".pb", data})
	}

	for _, out := range outputs {
		if err := os.WriteFile(out.path, out.data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", out.path, len(out.data))
	}
	return nil
}

// codecs holds the serializers of client-go's scheme, as kube-apiserver and client-go use them.
type codecs struct {
	// json decodes the fixtures, rejecting unknown and duplicated fields.
	json runtime.Decoder
	// proto is the protobuf entry of the scheme's codec factory: the full serializer, and the
	// stream serializer with its framer.
	proto runtime.SerializerInfo
}

func newCodecs() (*codecs, error) {
	proto, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok || proto.StreamSerializer == nil {
		return nil, errors.New("client-go's scheme has no protobuf stream serializer")
	}
	strict := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		serializerjson.SerializerOptions{Strict: true})
	return &codecs{json: strict, proto: proto}, nil
}

// decodeJSON decodes one JSON object of a kind client-go's scheme knows.
func (c *codecs) decodeJSON(data []byte) (runtime.Object, schema.GroupVersionKind, error) {
	obj, gvk, err := c.json.Decode(data, nil, nil)
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	return obj, *gvk, nil
}

// object encodes the object of JSON fixture path as a protobuf response body.
func (c *codecs) object(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The fixtures are indented to be read; kube-apiserver holds and serves compact JSON, and
	// the embedded JSON of FieldsV1 and RawExtension keeps whatever spacing it arrives with.
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	obj, gvk, err := c.decodeJSON(compact.Bytes())
	if err != nil {
		return nil, err
	}
	// The versioning codec sets the object's kind as it encodes: give it a copy.
	encoded, err := runtime.Encode(scheme.Codecs.EncoderForVersion(c.proto.Serializer, gvk.GroupVersion()), obj.DeepCopyObject())
	if err != nil {
		return nil, fmt.Errorf("encoding protobuf: %w", err)
	}

	decoder, err := runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), gvk.GroupVersion()).
		Decoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		return nil, err
	}
	back, backGVK, err := decoder.Decode(encoded, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("client-go cannot decode the protobuf: %w", err)
	}
	if err := compare(path, gvk, obj, *backGVK, back); err != nil {
		return nil, err
	}
	return encoded, nil
}

// compare fails unless what client-go decoded from protobuf (gotGVK from the envelope, got)
// is the object of the JSON fixture named what (wantGVK, want), but for what protobuf cannot
// carry.
//
// client-go's decoders clear apiVersion and kind of the objects they return, so those are
// compared as the envelope's. TypeMeta has no protobuf field, so below the envelope apiVersion
// and kind are lost on the wire, though kube-apiserver's JSON has some: it sets them on a
// StatefulSet's volumeClaimTemplates (https://issue.k8s.io/87583). A note says when a fixture
// has such.
func compare(what string, wantGVK schema.GroupVersionKind, want runtime.Object, gotGVK schema.GroupVersionKind, got runtime.Object) error {
	if gotGVK != wantGVK {
		return fmt.Errorf("the protobuf envelope says %s, the JSON %s", gotGVK, wantGVK)
	}
	want = want.DeepCopyObject()
	want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if clearTypeMeta(reflect.ValueOf(want)) {
		fmt.Fprintf(os.Stderr, "note: %s: apiVersion and kind below the top level do not travel in protobuf\n", what)
	}
	if !apiequality.Semantic.DeepEqual(want, got) {
		return fmt.Errorf("the protobuf decodes to another object:\n%s", diff.Diff(want, got))
	}
	return nil
}

var typeMeta = reflect.TypeFor[metav1.TypeMeta]()

// clearTypeMeta zeroes every metav1.TypeMeta reachable from v and reports whether one was set.
func clearTypeMeta(v reflect.Value) bool {
	cleared := false
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			cleared = clearTypeMeta(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			cleared = clearTypeMeta(v.Index(i)) || cleared
		}
	case reflect.Map:
		for iter := v.MapRange(); iter.Next(); {
			// A map value cannot be set in place: clear a copy and store it back.
			value := reflect.New(v.Type().Elem()).Elem()
			value.Set(iter.Value())
			if clearTypeMeta(value) {
				v.SetMapIndex(iter.Key(), value)
				cleared = true
			}
		}
	case reflect.Struct:
		if v.Type() == typeMeta {
			if v.IsZero() {
				return false
			}
			v.SetZero()
			return true
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				cleared = clearTypeMeta(v.Field(i)) || cleared
			}
		}
	}
	return cleared
}

// event is one line of a .watch.jsonl fixture.
type event struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// decodedEvent is an event whose object has been decoded.
type decodedEvent struct {
	typ watch.EventType
	gvk schema.GroupVersionKind
	obj runtime.Object
}

// watch encodes the events of fixture path as the body of a protobuf watch.
func (c *codecs) watch(path string) ([]byte, error) {
	events, gv, err := c.readEvents(path)
	if err != nil {
		return nil, err
	}

	// As kube-apiserver's serveWatchHandler and watchEncoder do, for a watch of group
	// version gv: the embedded encoder writes the object, the stream encoder the event.
	embedded := scheme.Codecs.EncoderForVersion(c.proto.Serializer, gv)
	encoder := scheme.Codecs.EncoderForVersion(c.proto.StreamSerializer.Serializer, gv)
	var stream bytes.Buffer
	framer := c.proto.StreamSerializer.Framer.NewFrameWriter(&stream)
	for i, ev := range events {
		raw, err := runtime.Encode(embedded, ev.obj.DeepCopyObject())
		if err != nil {
			return nil, fmt.Errorf("event %d: encoding the object: %w", i+1, err)
		}
		out := &metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: raw}}
		frame, err := runtime.Encode(encoder, out)
		if err != nil {
			return nil, fmt.Errorf("event %d: encoding the event: %w", i+1, err)
		}
		if _, err := framer.Write(frame); err != nil {
			return nil, err
		}
	}

	if err := c.checkWatch(path, stream.Bytes(), gv, events); err != nil {
		return nil, err
	}
	return stream.Bytes(), nil
}

// readEvents reads a .watch.jsonl fixture and the group version all its objects share.
func (c *codecs) readEvents(path string) ([]decodedEvent, schema.GroupVersion, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, schema.GroupVersion{}, err
	}
	defer f.Close()

	var events []decodedEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 64<<20)
	for line := 1; scanner.Scan(); line++ {
		dec := json.NewDecoder(bytes.NewReader(scanner.Bytes()))
		dec.DisallowUnknownFields()
		var ev event
		if err := dec.Decode(&ev); err != nil {
			return nil, schema.GroupVersion{}, fmt.Errorf("line %d: %w", line, err)
		}
		if dec.More() {
			return nil, schema.GroupVersion{}, fmt.Errorf("line %d: more than one JSON value", line)
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
		default:
			return nil, schema.GroupVersion{}, fmt.Errorf("line %d: unknown event type %q", line, ev.Type)
		}
		obj, gvk, err := c.decodeJSON(ev.Object)
		if err != nil {
			return nil, schema.GroupVersion{}, fmt.Errorf("line %d: %w", line, err)
		}
		if len(events) > 0 && gvk.GroupVersion() != events[0].gvk.GroupVersion() {
			return nil, schema.GroupVersion{}, fmt.Errorf("line %d: a %s object in a watch of %s",
				line, gvk.GroupVersion(), events[0].gvk.GroupVersion())
		}
		events = append(events, decodedEvent{typ: ev.Type, gvk: gvk, obj: obj})
	}
	if err := scanner.Err(); err != nil {
		return nil, schema.GroupVersion{}, err
	}
	if len(events) == 0 {
		return nil, schema.GroupVersion{}, errors.New("no events")
	}
	return events, events[0].gvk.GroupVersion(), nil
}

// kindRecorder is a decoder that remembers the kind of the last envelope it decoded, which
// restclientwatch's decoder drops.
type kindRecorder struct {
	runtime.Decoder
	last schema.GroupVersionKind
}

func (r *kindRecorder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := r.Decoder.Decode(data, defaults, into)
	r.last = schema.GroupVersionKind{}
	if gvk != nil {
		r.last = *gvk
	}
	return obj, gvk, err
}

// checkWatch decodes stream as client-go's REST client decodes a protobuf watch and compares
// what comes out with events.
func (c *codecs) checkWatch(path string, stream []byte, gv schema.GroupVersion, events []decodedEvent) error {
	objects, serializer, framer, err := runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), gv).
		StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		return err
	}
	kinds := &kindRecorder{Decoder: objects}
	frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	decoder := restclientwatch.NewDecoder(streaming.NewDecoder(frames, serializer), kinds)
	defer decoder.Close()
	for i, want := range events {
		typ, obj, err := decoder.Decode()
		if err != nil {
			return fmt.Errorf("event %d: client-go cannot decode the stream: %w", i+1, err)
		}
		if typ != want.typ {
			return fmt.Errorf("event %d: decoded as %s, not %s", i+1, typ, want.typ)
		}
		if err := compare(fmt.Sprintf("%s event %d", path, i+1), want.gvk, want.obj, kinds.last, obj); err != nil {
			return fmt.Errorf("event %d: %w", i+1, err)
		}
	}
	if _, _, err := decoder.Decode(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("the stream does not end after %d events: %v", len(events), err)
	}
	return nil
}
