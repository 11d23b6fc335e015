package sim

// Name implements lockactor.Namer: the lock name of the ref's machine.
func (r ref) Name() string { return r.name }
