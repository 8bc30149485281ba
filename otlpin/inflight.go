package otlpin

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
	"sync"
)

// budget bounds the memory of the requests being read and decoded, all transports together.
// A request takes from it before it reads, in steps, and gives all back when it is filed: a
// request that would pass the bound is refused at once, before its bytes are in memory. An
// authenticated sender may take at most half of it, so that one sender's flood leaves room for
// the others.
type budget struct {
	max int64

	mu       sync.Mutex
	used     int64
	bySender map[string]int64
}

func (b *budget) take(n int64, sender string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max || sender != "" && b.bySender[sender]+n > b.max/2 {
		return false
	}
	b.used += n
	if sender != "" {
		if b.bySender == nil {
			b.bySender = map[string]int64{}
		}
		b.bySender[sender] += n
	}
	return true
}

func (b *budget) give(n int64, sender string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if sender != "" {
		if b.bySender[sender] -= n; b.bySender[sender] <= 0 {
			delete(b.bySender, sender)
		}
	}
}

// maxMessage is the largest message the budget can ever admit, at most maxRequestBytes: a
// larger one is refused as too large, not told to retry forever. An authenticated sender's
// half of the bound decides it.
func (b *budget) maxMessage(sender string) int64 {
	avail := b.max
	if sender != "" {
		avail = b.max / 2
	}
	return min(maxRequestBytes, (avail-chunkCharge)/inflightPerByte/readStep*readStep)
}

// charge is one request's share of the budget.
type charge struct {
	b      *budget
	sender string
	n      int64
}

func (c *charge) take(n int64) bool {
	if !c.b.take(n, c.sender) {
		return false
	}
	c.n += n
	return true
}

func (c *charge) release() {
	c.b.give(c.n, c.sender)
	c.n = 0
}

// What a request costs while in flight, charged to the budget: per byte of its message (the
// bytes as read, the one buffer they are copied into, the request's list of the traces it adds
// to) and, once, the chunk of decoded spans it files at a time.
const (
	inflightPerByte = 3
	chunkCharge     = 1 << 20
	readStep        = 32 << 10
)

var (
	// errBusy: the budget is spent; the sender is told to retry later.
	errBusy = errors.New("too many requests in flight: retry later")
	// errTooLarge: the message is larger than the budget's maxMessage, compressed or not.
	errTooLarge = errors.New("request too large (decompressed)")
	// errBadGzip: the body is not gzip.
	errBadGzip = errors.New("bad gzip body")
)

// readMessage reads a request's message from body, decompressing gzip, and charges it to c as
// it goes: at most the budget's maxMessage once decompressed, counted as they are read, so a small
// body that would expand past the bound is refused having cost its bound and no more. size is
// the message's length when the sender said it (uncompressed), else -1.
func readMessage(body io.Reader, gz bool, size int64, c *charge) ([]byte, error) {
	limit := c.b.maxMessage(c.sender)
	if size > limit {
		return nil, errTooLarge
	}
	if !c.take(chunkCharge) {
		return nil, errBusy
	}
	if gz {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, errBadGzip
		}
		defer zr.Close()
		body, size = zr, -1
	}
	if size >= 0 {
		if !c.take(size * inflightPerByte) {
			return nil, errBusy
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		if n, _ := body.Read(make([]byte, 1)); n > 0 {
			return nil, errTooLarge
		}
		return b, nil
	}
	// Read in fixed steps, copied once into one buffer at the end: a buffer grown by append
	// would hold up to twice what it read, and leave its earlier arrays behind.
	var steps [][]byte
	n := 0
	for {
		if int64(n) >= limit {
			// At the limit a byte more, read without a charge, says the message is too large.
			if k, _ := io.ReadFull(body, make([]byte, 1)); k > 0 {
				return nil, errTooLarge
			}
			break
		}
		if !c.take(readStep * inflightPerByte) {
			return nil, errBusy
		}
		step := make([]byte, readStep)
		k, err := io.ReadFull(body, step)
		if k > 0 {
			steps = append(steps, step[:k])
			n += k
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			var corrupt flate.CorruptInputError
			if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt) {
				return nil, errBadGzip
			}
			return nil, err
		}
	}
	if int64(n) > limit {
		return nil, errTooLarge
	}
	b := make([]byte, 0, n)
	for i, step := range steps {
		b = append(b, step...)
		steps[i] = nil
	}
	return b, nil
}
