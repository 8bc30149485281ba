package proxyrules

import (
	"errors"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// monitor is told by the kernel of every nftables transaction (the NFNLGRP_NFTABLES group) and
// signals the ones that touched a table kube-proxy writes.
//
// google/nftables' Monitor decodes every rule, set and element of every transaction and buffers
// a whole transaction's events until its NEWGEN; this only needs to know whether one of kube-
// proxy's tables was touched, and when, so it reads the message headers and the table name (the
// first attribute of every table, chain, rule, set and element message) and nothing more: its
// memory is one flag and one time, however large a transaction is.
type monitor struct {
	conn *netlink.Conn

	mu      sync.Mutex
	pending time.Time // receipt of the first signalled generation not yet taken; zero if none
	err     error     // why the monitor stopped; set once
	wake    chan struct{}
}

// recvBuffer is the monitor socket's receive buffer: an iptables-restore of many Services is one
// burst of messages, and a buffer that overflows loses them (ENOBUFS, handled as "re-read").
const recvBuffer = 8 << 20

func openMonitor() (*monitor, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetReadBuffer(recvBuffer) // best effort: a smaller buffer only overflows sooner
	m := &monitor{conn: c, wake: make(chan struct{}, 1)}
	go m.loop()
	return m, nil
}

func (m *monitor) close() {
	if m.conn != nil {
		_ = m.conn.Close()
	}
}

func (m *monitor) loop() {
	dirty := false
	for {
		msgs, err := m.conn.Receive()
		now := time.Now()
		if errors.Is(err, unix.ENOBUFS) {
			// Notifications were lost: something changed, and what is unknown. Re-read.
			m.signal(now)
			dirty = false
			continue
		}
		if err != nil {
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			m.signal(time.Time{})
			return
		}
		for _, msg := range msgs {
			if msg.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES {
				continue
			}
			if msg.Header.Type&0xff == unix.NFT_MSG_NEWGEN {
				if dirty {
					m.signal(now)
				}
				dirty = false
				continue
			}
			dirty = dirty || relevant(msg.Data)
		}
	}
}

// relevant reports whether a notification's message (nfgenmsg, then attributes) is about a table
// kube-proxy writes: ip or ip6 nat or kube-proxy. A message it cannot parse counts as relevant.
func relevant(data []byte) bool {
	if len(data) < 4 {
		return true
	}
	if fam := data[0]; fam != unix.NFPROTO_IPV4 && fam != unix.NFPROTO_IPV6 {
		return false
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return true
	}
	for ad.Next() {
		if ad.Type() == 1 { // NFTA_{TABLE_NAME,CHAIN_TABLE,RULE_TABLE,SET_TABLE,SET_ELEM_LIST_TABLE}
			t := ad.String()
			return t == tableIPTables || t == tableNFTables
		}
	}
	return true
}

// signal records at as a pending change (keeping the earliest) and wakes the reader.
func (m *monitor) signal(at time.Time) {
	m.mu.Lock()
	if m.pending.IsZero() || (!at.IsZero() && at.Before(m.pending)) {
		m.pending = at
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// take returns the earliest pending change's receipt time and clears it; err is set once the
// monitor has stopped.
func (m *monitor) take() (at time.Time, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok = m.pending, !m.pending.IsZero()
	m.pending = time.Time{}
	return at, ok, m.err
}
