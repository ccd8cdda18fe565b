package pvaconn

import (
	"errors"
	"sync/atomic"
)

// BudgetFreeSend is the part of each connection's send queue not charged
// to its Budget: a client reading its replies never holds more, so it is
// never closed because others exhausted the budget.
const BudgetFreeSend = 64 << 10

// ErrBudget ends a connection that needed more of its listener's Budget
// than was left.
var ErrBudget = errors.New("pvaconn: the listener's buffer budget is exhausted")

// Budget is a byte budget shared by the connections of one listener: the
// bytes each queues to send beyond BudgetFreeSend, and the read and
// reassembly buffers it grows beyond the base read buffer for large
// messages. A connection that would take more than is left is closed
// (ErrBudget, counted BudgetExceeded). Per-connection bounds multiply by
// the number of connections; this is the bound on what all peers together
// can make the daemon buffer. The zero value (or a nil *Budget) counts but
// bounds nothing.
type Budget struct {
	max  atomic.Int64
	used atomic.Int64
}

// SetMax sets the bound (0: none). Lowering it closes nothing: connections
// are refused more until the use falls under it.
func (b *Budget) SetMax(n int64) { b.max.Store(n) }

// Used is the bytes charged now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

func (b *Budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		u, m := b.used.Load(), b.max.Load()
		if m > 0 && u+n > m {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *Budget) give(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// overFree is the part of a send queue of q bytes charged to the budget.
func overFree(q int) int64 { return int64(max(0, q-BudgetFreeSend)) }

// account brings the budget in line with rd's buffers: everything beyond
// the base read buffer, and the reassembly buffer. Growth the budget
// cannot cover ends the connection.
func (c *Conn) account(rd *reader) error {
	want := int64(max(0, len(rd.buf)-readBufSize) + cap(rd.seg))
	switch d := want - rd.charged; {
	case d > 0:
		if !c.opt.Budget.take(d) {
			c.cnt.BudgetExceeded.Add(1)
			return ErrBudget
		}
	case d < 0:
		c.opt.Budget.give(-d)
	}
	rd.charged = want
	return nil
}
