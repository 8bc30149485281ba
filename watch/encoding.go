package watch

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Encoding is the wire format the Watcher asks the apiserver for when it lists and watches.
type Encoding string

const (
	// EncodingProtobuf asks for the Kubernetes protobuf encoding and accepts JSON: the apiserver
	// answers protobuf for built-in kinds and JSON for what it cannot encode so (custom
	// resources). It costs the apiserver and readyspan less CPU per object than JSON, as
	// kube-state-metrics and the control plane's own components read it.
	EncodingProtobuf Encoding = "protobuf"
	// EncodingJSON asks for JSON only: for a proxy or an aggregated apiserver in between that
	// mishandles protobuf, or to compare the two.
	EncodingJSON Encoding = "json"

	// DefaultEncoding is what readyspan asks for unless told otherwise.
	DefaultEncoding = EncodingProtobuf
)

// Encodings are the encodings there are, in the order a flag's help lists them.
var Encodings = []Encoding{EncodingProtobuf, EncodingJSON}

// The media types each encoding sends as Content-Type and asks for in Accept.
const (
	contentTypeProtobuf = runtime.ContentTypeProtobuf // application/vnd.kubernetes.protobuf
	acceptProtobuf      = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	contentTypeJSON     = runtime.ContentTypeJSON
)

// ParseEncoding reads a --watch-encoding value.
func ParseEncoding(s string) (Encoding, error) {
	for _, e := range Encodings {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("unknown watch encoding %q: want %s or %s", s, EncodingProtobuf, EncodingJSON)
}

// RESTConfig returns a copy of cfg whose clients ask for e. It is explicit even for protobuf,
// which client-go's typed clients ask for by themselves when a config names no content type:
// a config that names one (client-go's CBOR feature gates, a caller's) would otherwise decide
// for readyspan, and nothing would say so.
func (e Encoding) RESTConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	switch e {
	case EncodingJSON:
		cfg.ContentType, cfg.AcceptContentTypes = contentTypeJSON, contentTypeJSON
	default:
		cfg.ContentType, cfg.AcceptContentTypes = contentTypeProtobuf, acceptProtobuf
	}
	return cfg
}

// NewClients makes, from cfg, the client that asks for e and the one kinds with no protobuf
// encoding are read through (Config.JSONClient): the same client when e is JSON. The protobuf
// client's watch streams come without the managedFields' field sets, and their Pods without
// what Transform drops (strip.go); their envelopes are read in place (envelope.go).
func NewClients(cfg *rest.Config, e Encoding) (client, jsonClient kubernetes.Interface, err error) {
	ecfg := e.RESTConfig(cfg)
	if e != EncodingJSON {
		ecfg.Wrap(stripUnread)
	}
	if e == EncodingJSON {
		if client, err = kubernetes.NewForConfig(ecfg); err != nil {
			return nil, nil, fmt.Errorf("create client for %s: %w", cfg.Host, err)
		}
		return client, client, nil
	}
	if client, err = newEnvelopeClient(ecfg); err != nil {
		return nil, nil, fmt.Errorf("create client for %s: %w", cfg.Host, err)
	}
	if jsonClient, err = kubernetes.NewForConfig(EncodingJSON.RESTConfig(cfg)); err != nil {
		return nil, nil, fmt.Errorf("create JSON client for %s: %w", cfg.Host, err)
	}
	return client, jsonClient, nil
}

// clientFor returns the client a kind is listed and watched through: the JSON client for a kind
// read in JSON while the Watcher's client asks for protobuf.
func (cfg Config) clientFor(k *Kind, client kubernetes.Interface) kubernetes.Interface {
	if k.Encoding(cfg.Encoding) == EncodingJSON && cfg.Encoding != EncodingJSON && cfg.JSONClient != nil {
		return cfg.JSONClient
	}
	return client
}

// Encoding is the encoding the kind is read in when want is asked for ("" is DefaultEncoding):
// JSON for a kind that has no protobuf encoding, want otherwise.
func (k *Kind) Encoding(want Encoding) Encoding {
	if k.JSONOnly || want == EncodingJSON {
		return EncodingJSON
	}
	return EncodingProtobuf
}
