package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/safetext"
)

// scopeName is the instrumentation scope of the node component's spans.
const scopeName = "github.com/readyspan/readyspan/dataplane/agent"

// attemptTimeout bounds one export request: a receiver that hangs is a failing receiver.
const attemptTimeout = 10 * time.Second

// maxResponse is how much of a receiver's answer is read: enough for an OTLP status message.
const maxResponse = 64 << 10

// target is where and how the spans go, as Config's flags resolve it.
type target struct {
	url       string // the OTLP/HTTP traces URL
	tokenFile string // "" sends no token
	client    *http.Client
}

// resolveTarget checks the endpoint's flags and builds the HTTP client. A bearer token never
// goes out in plain text except to loopback: anyone on the path could replay it.
func resolveTarget(c Config) (target, error) {
	if c.Endpoint == "" {
		return target{}, errors.New("no OTLP endpoint: the central readyspan's --otlp-receive address, e.g. https://readyspan.readyspan.svc:4321")
	}
	raw := c.Endpoint
	if !strings.Contains(raw, "://") {
		scheme := "https://"
		if c.Insecure {
			scheme = "http://"
		}
		raw = scheme + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return target{}, fmt.Errorf("OTLP endpoint %q: want host:port or an http(s):// URL", c.Endpoint)
	}
	if c.Insecure {
		u.Scheme = "http"
	}
	loopback := isLoopback(u.Hostname())
	switch {
	case u.Scheme == "http" && !c.Insecure && !loopback:
		return target{}, fmt.Errorf("OTLP endpoint %s is plain HTTP to a non-loopback address: use https://, or --otlp-insecure for a trusted network", u.Host)
	case u.Scheme == "http" && c.TokenFile != "" && !loopback:
		return target{}, fmt.Errorf("a token would go in plain text to %s, where anyone on the path could replay it: use TLS (https:// and --otlp-ca-file)", u.Host)
	case u.Scheme == "http" && c.CAFile != "":
		return target{}, errors.New("--otlp-ca-file is for TLS: it cannot go with a plain-text endpoint")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	tr := &http.Transport{
		// Straight to the receiver: a bearer token is not for an HTTP proxy from the
		// environment, and the receiver is in the cluster.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConns:        2,
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return target{}, fmt.Errorf("read the OTLP CA: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return target{}, fmt.Errorf("%s holds no PEM certificate", c.CAFile)
			}
		}
		tr.TLSClientConfig = cfg
	}
	if c.TokenFile != "" {
		if _, err := readToken(c.TokenFile); err != nil {
			return target{}, err
		}
	}
	return target{url: u.String(), tokenFile: c.TokenFile, client: &http.Client{Transport: tr}}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readToken reads the bearer token. It is read again for every request: a projected
// ServiceAccount token is rewritten by the kubelet before it expires, and the old one stops
// working.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("the token file %s is empty or not one token", file)
	}
	return tok, nil
}

// exportError is a failed request, and whether trying it again may succeed.
type exportError struct {
	msg        string
	retry      bool
	retryAfter time.Duration // the receiver's Retry-After, if it said one
}

func (e *exportError) Error() string { return e.msg }

// send posts one batch as an OTLP/HTTP request; rejected is how many spans the receiver
// accepted the request but refused (its partial success).
func (t target) send(ctx context.Context, body []byte) (rejected int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return 0, &exportError{msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if t.tokenFile != "" {
		tok, err := readToken(t.tokenFile)
		if err != nil {
			return 0, &exportError{msg: err.Error(), retry: true}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, &exportError{msg: safetext.OneLine(err), retry: true}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 == 2 {
		var out collectortrace.ExportTraceServiceResponse
		if proto.Unmarshal(b, &out) == nil && out.PartialSuccess != nil {
			return out.PartialSuccess.RejectedSpans, nil
		}
		return 0, nil
	}
	return 0, answerError(resp, b)
}

// answerError reads a refusal: the OTLP status message if there is one (the receiver's text,
// so made one safe line), and whether the OTLP specification says to retry. 401 and 403 are
// retried too: a token the kubelet is about to refresh, or RBAC bound after the DaemonSet
// started, heals without a restart, and the queue's bound limits what waits meanwhile.
func answerError(resp *http.Response, body []byte) error {
	msg := ""
	var st spb.Status
	if proto.Unmarshal(body, &st) == nil {
		msg = st.GetMessage()
	}
	if msg == "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") {
		msg = string(body)
	}
	e := &exportError{msg: fmt.Sprintf("OTLP receiver answered %s: %s", safetext.Cut(resp.Status, 64), safetext.Cut(msg, 256))}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
		http.StatusUnauthorized, http.StatusForbidden:
		e.retry = true
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.retryAfter = time.Duration(min(s, 3600)) * time.Second
	}
	return e
}

// request is the OTLP message of a batch: one resource (the component on its node), one
// scope, and each span its own trace, a point in time (start = end), since a change is an
// instant and belongs to no trace of the node's own: the central readyspan files it under the
// Pod whose address it names.
func request(node string, batch []item) *collectortrace.ExportTraceServiceRequest {
	spans := make([]*tracepb.Span, len(batch))
	for i, it := range batch {
		var tid [16]byte
		var sid [8]byte
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
		putUint64(sid[:], rand.Uint64()|1) // an all-zero span ID is invalid
		at := uint64(max(it.at.UnixNano(), 0))
		spans[i] = &tracepb.Span{TraceId: tid[:], SpanId: sid[:], Name: it.name, Kind: tracepb.Span_SPAN_KIND_INTERNAL,
			StartTimeUnixNano: at, EndTimeUnixNano: at, Attributes: attributes(it.attrs)}
	}
	res := &resourcepb.Resource{Attributes: attributes([]phases.Attr{
		{Key: "service.name", Value: dataplane.Component}, {Key: dataplane.AttrNode, Value: node}})}
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   res,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: scopeName}, Spans: spans}},
	}}}
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// attributes converts the contract's attributes; a value of another type is sent as its text.
func attributes(as []phases.Attr) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, len(as))
	for i, a := range as {
		v := &commonpb.AnyValue{}
		switch x := a.Value.(type) {
		case string:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: x}
		case int64:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: x}
		case float64:
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: x}
		case bool:
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: x}
		default:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: fmt.Sprint(x)}
		}
		out[i] = &commonpb.KeyValue{Key: a.Key, Value: v}
	}
	return out
}
