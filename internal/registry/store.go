package registry

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"time"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/pvans-project/pvans/internal/pva"
)

// The go-memdb tables (see the package doc, "Two stores, one writer").
const (
	tabServers   = "servers"
	tabConflicts = "conflicts"
	tabRevision  = "revision"
)

// serverRow is a row of "servers". A row is never changed once inserted: a
// change inserts a copy, so a read transaction's rows stay as they were.
type serverRow struct {
	GUID    pva.GUID
	Slot    uint32 // the server's slot: what the name index stores per name
	AddrKey string // Addr.String(), "" if unset
	Info    ServerInfo
	// srv is the writer's state for the server, shared by every version
	// of its row; only the writer (wmu held) follows it.
	srv *server
}

// conflictRow is a row of "conflicts": Claimant claims Name, which Holder
// answers for.
type conflictRow struct {
	Name     string
	Holder   pva.GUID
	Claimant pva.GUID
	Seq      uint64 // claim order; the lowest takes over
	Since    time.Time
	How      Source
}

// revisionRow is the one row of "revision": the number of the last commit
// that changed "servers" or "conflicts", and the counts as of it.
type revisionRow struct {
	Rev    uint64
	Counts Counts
}

func schema() *memdb.DBSchema {
	serverGUID := guidField(func(o any) *pva.GUID { return &o.(*serverRow).GUID })
	claimant := guidField(func(o any) *pva.GUID { return &o.(*conflictRow).Claimant })
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tabServers: {Name: tabServers, Indexes: map[string]*memdb.IndexSchema{
			"id":   {Name: "id", Unique: true, Indexer: serverGUID},
			"slot": {Name: "slot", Unique: true, Indexer: slotField{}},
			"addr": {Name: "addr", AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "AddrKey"}},
		}},
		tabConflicts: {Name: tabConflicts, Indexes: map[string]*memdb.IndexSchema{
			"id": {Name: "id", Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.StringFieldIndex{Field: "Name"}, claimant}}},
			"name": {Name: "name", Indexer: &memdb.StringFieldIndex{Field: "Name"}},
		}},
		tabRevision: {Name: tabRevision, Indexes: map[string]*memdb.IndexSchema{
			"id": {Name: "id", Unique: true, Indexer: oneRow{}},
		}},
	}}
}

// guidField indexes a GUID field by its 12 bytes, without formatting or
// reflection. The key aliases the row's field, which never changes.
type guidField func(row any) *pva.GUID

func (f guidField) FromObject(row any) (bool, []byte, error) { return true, f(row)[:], nil }

func (guidField) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("one GUID wanted, %d arguments given", len(args))
	}
	g, ok := args[0].(pva.GUID)
	if !ok {
		return nil, fmt.Errorf("a pva.GUID wanted, %T given", args[0])
	}
	return g[:], nil
}

// slotField indexes serverRow.Slot (4 bytes, big endian).
type slotField struct{}

func (slotField) FromObject(row any) (bool, []byte, error) {
	return true, binary.BigEndian.AppendUint32(nil, row.(*serverRow).Slot), nil
}

func (slotField) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("one slot wanted, %d arguments given", len(args))
	}
	s, ok := args[0].(uint32)
	if !ok {
		return nil, fmt.Errorf("a uint32 slot wanted, %T given", args[0])
	}
	return binary.BigEndian.AppendUint32(nil, s), nil
}

// oneRow is the key of a table's only row.
type oneRow struct{}

func (oneRow) FromObject(any) (bool, []byte, error) { return true, []byte{0}, nil }
func (oneRow) FromArgs(...any) ([]byte, error)      { return []byte{0}, nil }

// wtxn is the writer's transaction. It notes whether "servers" or
// "conflicts" changed, so that only such commits move the revision (and
// wake its watchers). Every write goes through it, with wmu held.
type wtxn struct {
	t       *memdb.Txn
	changed bool
}

func (r *Registry) write() *wtxn { return &wtxn{t: r.db.Txn(true)} }

// abort drops an uncommitted transaction; after commit it does nothing.
func (w *wtxn) abort() { w.t.Abort() }

func (w *wtxn) insert(table string, row any) {
	if err := w.t.Insert(table, row); err != nil {
		panic(fmt.Sprintf("registry: insert into %s: %v", table, err)) // schema invariant
	}
	w.changed = true
}

func (w *wtxn) delete(table string, row any) {
	if w.t.Delete(table, row) == nil {
		w.changed = true
	}
}

// server returns g's writer state, nil if g is not registered.
func (w *wtxn) server(g pva.GUID) *server {
	if row := serverBy(w.t, "id", g); row != nil {
		return row.srv
	}
	return nil
}

// conflict returns claimant's duplicate claim on name, nil if none.
func (w *wtxn) conflict(name string, claimant pva.GUID) *conflictRow {
	o, err := w.t.First(tabConflicts, "id", name, claimant)
	if err != nil {
		panic(err)
	}
	if o == nil {
		return nil
	}
	return o.(*conflictRow)
}

// conflictsOn returns the duplicate claims on name in claim order.
func (w *wtxn) conflictsOn(name string) []*conflictRow {
	it, err := w.t.Get(tabConflicts, "name", name)
	if err != nil {
		panic(err)
	}
	var rows []*conflictRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*conflictRow))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	return rows
}

// serversAt returns the rows registered at ep.
func (w *wtxn) serversAt(ep netip.AddrPort) []*serverRow {
	it, err := w.t.Get(tabServers, "addr", ep.String())
	if err != nil {
		panic(err)
	}
	var rows []*serverRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*serverRow))
	}
	return rows
}

// commit stores the next revision with the counts as of now when servers
// or claims changed, and commits; wmu held.
func (r *Registry) commit(w *wtxn) {
	if w.changed {
		r.rev++
		w.insert(tabRevision, &revisionRow{Rev: r.rev, Counts: r.countsLocked()})
	}
	w.t.Commit()
}

// countsLocked computes Counts from the writer's state; wmu held.
func (r *Registry) countsLocked() Counts {
	return Counts{Servers: r.serverCount(), Unverified: r.unverified, Names: r.idx.count, Claims: r.claims,
		DuplicateNames: r.idx.dupNames, Duplicates: r.idx.dupClaims}
}

// serverBy returns the row whose index ("id": a pva.GUID, "slot": a
// uint32) is arg, nil if none.
func serverBy(txn *memdb.Txn, index string, arg any) *serverRow {
	o, err := txn.First(tabServers, index, arg)
	if err != nil {
		panic(err)
	}
	if o == nil {
		return nil
	}
	return o.(*serverRow)
}

// View is one consistent reading of the registry: its servers, duplicate
// claims and counts as of one commit.
type View struct {
	// Revision numbers the commit; it moves (never repeating, not even
	// across a restart: see New) whenever servers or duplicate claims
	// change.
	Revision   uint64
	Servers    []ServerInfo // ordered by GUID
	Duplicates []Duplicate  // ordered by name, then claim order
	Counts     Counts
	// Changed is closed by the first commit after this view that changes
	// servers or duplicate claims.
	Changed <-chan struct{}
}

// View reads servers, duplicate claims and counts in one read transaction:
// a server listed in a duplicate claim is in Servers, and Counts add up.
// It takes no registry lock.
func (r *Registry) View() View {
	txn := r.db.Txn(false)
	v := readRevision(txn)
	it, _ := txn.Get(tabServers, "id")
	for o := it.Next(); o != nil; o = it.Next() {
		v.Servers = append(v.Servers, o.(*serverRow).Info)
	}
	v.Duplicates = duplicates(txn)
	return v
}

// Revision returns the current revision (View.Revision) and a channel
// closed when it moves, without reading the tables.
func (r *Registry) Revision() (uint64, <-chan struct{}) {
	v := readRevision(r.db.Txn(false))
	return v.Revision, v.Changed
}

func readRevision(txn *memdb.Txn) View {
	ch, o, err := txn.FirstWatch(tabRevision, "id")
	if err != nil {
		panic(err)
	}
	rev := o.(*revisionRow)
	return View{Revision: rev.Rev, Counts: rev.Counts, Changed: ch}
}

// Counts returns the registry's size as of the last commit; it takes no
// registry lock.
func (r *Registry) Counts() Counts { return readRevision(r.db.Txn(false)).Counts }

// Server returns one server's row.
func (r *Registry) Server(g pva.GUID) (ServerInfo, bool) {
	if row := serverBy(r.db.Txn(false), "id", g); row != nil {
		return row.Info, true
	}
	return ServerInfo{}, false
}

// Servers lists every server, ordered by GUID.
func (r *Registry) Servers() []ServerInfo {
	it, _ := r.db.Txn(false).Get(tabServers, "id")
	var out []ServerInfo
	for o := it.Next(); o != nil; o = it.Next() {
		out = append(out, o.(*serverRow).Info)
	}
	return out
}

// duplicates lists every duplicate claim of txn with both endpoints,
// ordered by name then claim order.
func duplicates(txn *memdb.Txn) []Duplicate {
	it, _ := txn.Get(tabConflicts, "id")
	var rows []*conflictRow
	for o := it.Next(); o != nil; o = it.Next() {
		rows = append(rows, o.(*conflictRow))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Name != rows[j].Name {
			return rows[i].Name < rows[j].Name
		}
		return rows[i].Seq < rows[j].Seq
	})
	out := make([]Duplicate, 0, len(rows))
	for _, c := range rows {
		d := Duplicate{Name: c.Name, Holder: c.Holder, Claimant: c.Claimant, Since: c.Since, ClaimantSource: c.How}
		if s := serverBy(txn, "id", c.Holder); s != nil {
			d.HolderAddr, d.HolderIdentity = s.Info.Addr, s.Info.Identity
		}
		if s := serverBy(txn, "id", c.Claimant); s != nil {
			d.ClaimantAddr, d.ClaimantIdentity = s.Info.Addr, s.Info.Identity
		}
		out = append(out, d)
	}
	return out
}
