package buildinfo

import "testing"

func TestVersionIsTheStampedOneElseDevel(t *testing.T) {
	if got := Version("v1.2.3"); got != "v1.2.3" {
		t.Errorf("Version(v1.2.3) = %q", got)
	}
	// a test binary records no module version
	if got := Version(""); got != "devel" {
		t.Errorf("Version(\"\") = %q, want devel", got)
	}
}
