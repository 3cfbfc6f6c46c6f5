package proxy

import "bytes"

// eventScan reads an event stream (text/event-stream) as its bytes pass:
// the data lines of each event make one JSON text, followed by a jsonScan
// without holding the line, so that a line of any length costs no memory.
type eventScan struct {
	line lineState
	// field is the start of the line's field name; fieldLen bytes of it.
	field    [len("data")]byte
	fieldLen int
	afterCR  bool // a '\n' right after '\r' ends no line
	data     bool // the event has a data line
	scan     jsonScan
	// last is what the last event that carried a usage object said.
	last usageFound
}

type lineState uint8

const (
	lineField lineState = iota // the field name, up to ':'
	lineSpace                  // after "data:", an optional space
	lineData                   // the data, to the end of the line
	lineSkip                   // a line of another field, or a comment
)

// write reads the next bytes of the stream.
func (e *eventScan) write(p []byte) {
	for len(p) > 0 {
		c := p[0]
		if e.afterCR {
			e.afterCR = false
			if c == '\n' {
				p = p[1:]
				continue
			}
		}
		switch e.line {
		case lineData, lineSkip:
			n := bytes.IndexAny(p, "\r\n")
			if n < 0 {
				n = len(p)
			}
			if e.line == lineData {
				e.scan.write(p[:n])
			}
			if p = p[n:]; len(p) > 0 {
				e.endLine()
				e.afterCR = p[0] == '\r'
				p = p[1:]
			}
			continue
		case lineSpace:
			e.line = lineData
			if c == ' ' {
				p = p[1:]
			}
			continue
		}
		switch {
		case c == '\r' || c == '\n':
			e.endLine()
			e.afterCR = c == '\r'
		case c == ':' && e.fieldLen == len(e.field) && string(e.field[:]) == "data":
			e.dataLine()
			e.line = lineSpace
		case e.fieldLen < len(e.field) && c == "data"[e.fieldLen]:
			e.field[e.fieldLen] = c
			e.fieldLen++
		default:
			e.line = lineSkip
		}
		p = p[1:]
	}
}

// dataLine starts a data line: the lines of one event are joined by a
// line feed, a space to JSON.
func (e *eventScan) dataLine() {
	if e.data {
		e.scan.write([]byte{'\n'})
	}
	e.data = true
}

// endLine ends a line; an empty one ends the event.
func (e *eventScan) endLine() {
	switch {
	case e.line == lineField && e.fieldLen == 0:
		e.dispatch()
	case e.line == lineField && e.fieldLen == len(e.field):
		e.dataLine() // "data" alone is an empty data line
	}
	e.line, e.fieldLen = lineField, 0
}

// dispatch ends an event: one that carries a usage object replaces what
// the events before it said. Others ("usage":null, [DONE]) change nothing.
func (e *eventScan) dispatch() {
	if e.data {
		e.scan.end()
		if e.scan.usageObject() {
			e.last = found(&e.scan)
		}
	}
	e.data = false
	e.scan.reset()
}

// end ends the stream; an event it cut short is read as it stands.
func (e *eventScan) end() usageFound {
	e.dispatch()
	return e.last
}
