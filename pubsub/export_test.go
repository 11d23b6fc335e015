package pubsub

// Connected reports whether m has a live dedicated connection, so tests can
// wait for the Manager to notice a killed server.
func Connected(m *Manager) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.single != nil && m.single.connected
}
