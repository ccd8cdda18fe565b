package registry

// Subscribe registers f to be called after every commit that makes names
// answerable (new holder, takeover, snapshot load), with those names. f is
// called on the committing goroutine after the registry's locks are
// released; it must not block. Field names are not expanded: a waiter for
// "rec.VAL" must watch for "rec" (see RecordOf).
func (r *Registry) Subscribe(f func(added []string)) {
	r.subMu.Lock()
	r.subs = append(r.subs, f)
	r.subMu.Unlock()
}

// SubscribeHandedOver registers f to be called after every commit in
// which names passed in place to another server — a server listed at the
// endpoint of one it replaces (Listed) — with those names. Subscribe is
// not told of them: they never stopped being answerable. Called like
// Subscribe's f, after it.
func (r *Registry) SubscribeHandedOver(f func(names []string)) {
	r.subMu.Lock()
	r.handedSubs = append(r.handedSubs, f)
	r.subMu.Unlock()
}

func (r *Registry) notifyHanded(names []string) {
	if len(names) == 0 {
		return
	}
	r.subMu.Lock()
	subs := r.handedSubs
	r.subMu.Unlock()
	for _, f := range subs {
		f(names)
	}
}

// SubscribeChanges registers f to be called after every commit that
// changed the answerable set: a name became answerable, stopped being
// answerable, or passed to another server. Called like Subscribe's f;
// commits that race may be reported by one call.
func (r *Registry) SubscribeChanges(f func()) {
	r.subMu.Lock()
	r.changeSubs = append(r.changeSubs, f)
	r.subMu.Unlock()
}

func (r *Registry) notify(added []string) {
	if g := r.gen.Load(); r.notifiedGen.Swap(g) != g {
		r.subMu.Lock()
		cs := r.changeSubs
		r.subMu.Unlock()
		for _, f := range cs {
			f()
		}
	}
	if len(added) == 0 {
		return
	}
	r.subMu.Lock()
	subs := r.subs
	r.subMu.Unlock()
	for _, f := range subs {
		f(added)
	}
}
