package otlpin

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// exportMethod is OTLP/gRPC's one method.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// serveGRPC is OTLP/gRPC's unary Export, served by readyspan itself on the HTTP/2 server it
// shares with OTLP/HTTP: the length the message states is checked and charged to the
// in-flight budget before a byte of it is read, its decompression counted as it goes, and a
// request past the budget refused with RESOURCE_EXHAUSTED and a retry delay, which a gRPC
// server library would answer only after reading the whole message into memory.
func (r *Receiver) serveGRPC(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != exportMethod {
		r.refuseGRPC(rw, codes.Unimplemented, refusedUnsupported, fmt.Sprintf("readyspan serves %s only", exportMethod), false)
		return
	}
	var gz bool
	switch enc := req.Header.Get("Grpc-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz = true
	default:
		rw.Header().Set("Grpc-Accept-Encoding", "gzip,identity")
		r.refuseGRPC(rw, codes.Unimplemented, refusedUnsupported, fmt.Sprintf("unsupported grpc-encoding %q", bound(enc, 64)), false)
		return
	}
	var prefix [5]byte
	if _, err := io.ReadFull(req.Body, prefix[:]); err != nil {
		r.refuseGRPC(rw, codes.InvalidArgument, refusedUnreadable, "no request message", false)
		return
	}
	compressed, size := prefix[0] == 1, int64(binary.BigEndian.Uint32(prefix[1:]))
	switch {
	case prefix[0] > 1 || compressed && !gz:
		r.refuseGRPC(rw, codes.Internal, refusedMalformed, "compressed flag without a grpc-encoding", false)
		return
	}
	sender := senderOf(req.Context())
	if limit := r.inflight.maxMessage(sender.Name); size > limit {
		r.refuseGRPC(rw, codes.ResourceExhausted, refusedTooLarge, fmt.Sprintf("message larger than max (%d vs. %d)", size, limit), false)
		return
	}
	c := &charge{b: r.inflight, sender: sender.Name}
	defer c.release()
	var body io.Reader = io.LimitReader(req.Body, size)
	if !compressed {
		body = &exactReader{r: body, left: size}
	}
	msgSize := size
	if compressed {
		msgSize = -1
	}
	b, err := readMessage(body, compressed, msgSize, c)
	if err == nil {
		err = r.file(sender, b)
	}
	switch {
	case err == nil:
		rw.Header().Set("Content-Type", "application/grpc")
		rw.Header().Add("Trailer", "Grpc-Status")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte{0, 0, 0, 0, 0}) // an ExportTraceServiceResponse with nothing to say
		rw.Header().Set("Grpc-Status", "0")
	case errors.Is(err, errBusy):
		r.refuseGRPC(rw, codes.ResourceExhausted, refusedBusy, err.Error(), true)
	case errors.Is(err, errTooLarge):
		r.refuseGRPC(rw, codes.ResourceExhausted, refusedTooLarge, err.Error(), false)
	case errors.Is(err, errBadGzip), errors.Is(err, errBadMessage):
		r.refuseGRPC(rw, codes.InvalidArgument, refusedMalformed, err.Error(), false)
	default: // the sender went away, was too slow, or sent less than it said
		r.refuseGRPC(rw, codes.Internal, refusedUnreadable, "the request message could not be read", false)
	}
}

// exactReader reads a message of a stated length, failing when the body ends sooner.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// refuseGRPC answers with a gRPC status in a trailers-only response and counts it; retry adds
// the delay a sender should wait (google.rpc.RetryInfo), which makes RESOURCE_EXHAUSTED
// retryable under the OTLP specification.
func (r *Receiver) refuseGRPC(rw http.ResponseWriter, code codes.Code, reason, msg string, retry bool) {
	r.store.m.refused(reason)
	st := statusProto(code, msg, retry)
	h := rw.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(code)))
	h.Set("Grpc-Message", grpcMessage(msg))
	if len(st.GetDetails()) > 0 {
		b, _ := proto.Marshal(st)
		h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(b))
	}
	rw.WriteHeader(http.StatusOK)
}

// statusProto is the google.rpc.Status both transports answer an error with.
func statusProto(code codes.Code, msg string, retry bool) *spb.Status {
	st := status.New(code, msg)
	if retry {
		if withRetry, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay)}); err == nil {
			st = withRetry
		}
	}
	return st.Proto()
}

// grpcMessage percent-encodes a status message as the gRPC protocol requires.
func grpcMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
