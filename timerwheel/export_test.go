package timerwheel

// Wakeups returns how many times the wheel's goroutine has woken up.
func (w *Wheel) Wakeups() int64 { return w.wakeups.Load() }

// alarmSet reports whether the wheel's alarm is set.
func (w *Wheel) alarmSet() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed != noTick
}

// armedAt returns the tick the alarm is set for, noTick if none.
func (w *Wheel) armedAt() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed
}
