package otlpin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// serveHTTP is OTLP/HTTP: POST /v1/traces, a protobuf ExportTraceServiceRequest, gzip or not.
// Errors are answered as the OTLP specification says: a protobuf google.rpc.Status, 429 with
// Retry-After when the sender should retry.
func (r *Receiver) serveHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		r.refuseHTTP(rw, http.StatusMethodNotAllowed, codes.Unimplemented, refusedUnsupported, "POST an OTLP ExportTraceServiceRequest")
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.refuseHTTP(rw, http.StatusUnsupportedMediaType, codes.InvalidArgument, refusedUnsupported,
			fmt.Sprintf("unsupported content type %q: readyspan reads OTLP/HTTP as application/x-protobuf", bound(ct, 64)))
		return
	}
	var gz bool
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		r.refuseHTTP(rw, http.StatusUnsupportedMediaType, codes.InvalidArgument, refusedUnsupported, fmt.Sprintf("unsupported content encoding %q", bound(enc, 64)))
		return
	}
	sender := senderOf(req.Context())
	c := &charge{b: r.inflight, sender: sender.Name}
	defer c.release()
	size := req.ContentLength
	if gz {
		size = -1
	}
	b, err := readMessage(http.MaxBytesReader(rw, req.Body, r.inflight.maxMessage(sender.Name)), gz, size, c)
	if err == nil {
		err = r.file(sender, b)
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		rw.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = rw.Write(out)
	case errors.Is(err, errBusy):
		rw.Header().Set("Retry-After", strconv.Itoa(int(retryDelay.Seconds())))
		r.refuseHTTP(rw, http.StatusTooManyRequests, codes.ResourceExhausted, refusedBusy, err.Error())
	case errors.Is(err, errTooLarge), errors.As(err, &tooLarge):
		r.refuseHTTP(rw, http.StatusRequestEntityTooLarge, codes.InvalidArgument, refusedTooLarge, errTooLarge.Error())
	case errors.Is(err, errBadGzip), errors.Is(err, errBadMessage):
		r.refuseHTTP(rw, http.StatusBadRequest, codes.InvalidArgument, refusedMalformed, err.Error())
	default: // the sender went away or was too slow
		r.store.m.refused(refusedUnreadable)
	}
}

// refuseHTTP answers an OTLP/HTTP request with an error status and counts it.
func (r *Receiver) refuseHTTP(rw http.ResponseWriter, httpCode int, code codes.Code, reason, msg string) {
	r.store.m.refused(reason)
	b, _ := proto.Marshal(statusProto(code, msg, false))
	rw.Header().Set("Content-Type", "application/x-protobuf")
	rw.WriteHeader(httpCode)
	_, _ = rw.Write(b)
}
