package compile

// Published returns the generation of the policy named name in r.Config: its
// current one when it compiled, the last one that did when it did not, and
// false when r.Config does not have it at all.
func (r *Result) Published(name string) (generation int64, ok bool) {
	for _, p := range r.Config.Policies {
		if p.Name == name {
			return p.Generation, true
		}
	}
	return 0, false
}
