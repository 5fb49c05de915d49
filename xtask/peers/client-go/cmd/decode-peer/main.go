// Command decode-peer decodes protobuf bodies as client-go does and prints each object as Go's
// JSON encoder writes it, so that kinformer's decoders can be compared with Go's on any input.
//
// Each input line is {"op": "decode", "body": HEX}, a whole response body (`k8s\0`, then the
// runtime.Unknown holding apiVersion, kind and the message), or {"op": "end"}, which flushes
// the answers so far. Each line gets one answer: {"object": ...} when client-go's protobuf
// decoder and encoding/json both accept the body, else {"error": "..."}. A line with
// "scheme": "meta" is decoded as client-go's metadata client decodes PartialObjectMetadata.
// See ../../README.md.
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	metascheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"kinformer.dev/peers/client-go/internal/lines"
)

type line struct {
	Op     string `json:"op"`
	Body   string `json:"body"`
	Scheme string `json:"scheme"`
}

func (l line) OpName() string { return l.Op }

type answer struct {
	Object json.RawMessage `json:"object,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func main() {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		fmt.Fprintln(os.Stderr, "decode-peer: client-go's scheme has no protobuf serializer")
		os.Exit(2)
	}
	// What client-go's REST client decodes a protobuf response with.
	decoder := scheme.Codecs.WithoutConversion().DecoderToVersion(info.Serializer, nil)
	// What client-go's metadata client decodes one with (metadata.ConfigFor).
	metaInfo, ok := runtime.SerializerInfoForMediaType(metascheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		fmt.Fprintln(os.Stderr, "decode-peer: the metadata scheme has no protobuf serializer")
		os.Exit(2)
	}
	metaDecoder := metascheme.Codecs.WithoutConversion().DecoderToVersion(metaInfo.Serializer, nil)
	lines.Serve(os.Stdin, os.Stdout, func(l line) answer {
		if l.Op != "decode" {
			return answer{}
		}
		body, err := hex.DecodeString(l.Body)
		if err != nil {
			return answer{Error: "the line's body is not hex: " + err.Error()}
		}
		chosen := decoder
		if l.Scheme == "meta" {
			chosen = metaDecoder
		}
		obj, _, err := chosen.Decode(body, nil, nil)
		if err != nil {
			return answer{Error: "decode: " + err.Error()}
		}
		text, err := json.Marshal(obj)
		if err != nil {
			return answer{Error: "json: " + err.Error()}
		}
		// encoding/json replaces invalid UTF-8 in the strings it writes, but embedded JSON
		// (FieldsV1, RawExtension) goes out as it came in; the answer line must stay UTF-8.
		if !utf8.Valid(text) {
			text = []byte(strings.ToValidUTF8(string(text), "\uFFFD"))
		}
		return answer{Object: text}
	})
}
