package images

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// runtimeStage reads the image that a Dockerfile in build/ describes, built
// with BINARIES=prebuilt from contextDir: the files of the last stage
// (COPY --from=binaries, each traced back to the context file the prebuilt
// stage copied), its USER, ENTRYPOINT and CMD. The Dockerfile stays the one
// definition of the runtime image; an instruction this reader does not know
// is an error, so a change there cannot be dropped here in silence.
func runtimeStage(dockerfile, contextDir string) (Spec, error) {
	stages, args, err := parseDockerfile(dockerfile)
	if err != nil {
		return Spec{}, err
	}
	fail := func(format string, a ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%s: %s", dockerfile, fmt.Sprintf(format, a...))
	}
	prebuilt := map[string]string{} // path in the prebuilt stage -> context file
	for _, st := range stages {
		if st.name != "prebuilt" {
			continue
		}
		for _, in := range st.instructions {
			src, dst, from, err := copyArgs(in)
			if err != nil || from != "" {
				return fail("the prebuilt stage may only COPY files from the context, found %q", in.line)
			}
			prebuilt[dst] = filepath.Join(contextDir, filepath.FromSlash(src))
		}
	}
	if len(stages) == 0 {
		return fail("no FROM")
	}
	last := stages[len(stages)-1]
	if base := expand(last.base, args); base != "scratch" {
		return fail("the runtime stage is FROM %q: node images are written onto scratch only", base)
	}
	var spec Spec
	for _, in := range last.instructions {
		switch in.keyword {
		case "COPY":
			src, dst, from, err := copyArgs(in)
			if err != nil || from != "binaries" {
				return fail("the runtime stage may only COPY --from=binaries, found %q", in.line)
			}
			file, ok := prebuilt[src]
			if !ok {
				return fail("%q copies %s, which the prebuilt stage does not provide", in.line, src)
			}
			spec.Files = append(spec.Files, File{Path: dst, Source: file})
		case "USER":
			spec.User = in.args
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &spec.Entrypoint); err != nil {
				return fail("ENTRYPOINT must be a JSON array: %v", err)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(in.args), &spec.Cmd); err != nil {
				return fail("CMD must be a JSON array: %v", err)
			}
		case "ARG":
		default:
			return fail("the runtime stage has %s, which make node-images does not write: add it to internal/testing/images", in.keyword)
		}
	}
	return spec, nil
}

type stage struct {
	base, name   string
	instructions []instruction
}

type instruction struct {
	keyword, args, line string
}

// parseDockerfile splits a Dockerfile into stages and returns the default
// values of the ARGs declared before the first FROM.
func parseDockerfile(name string) ([]stage, map[string]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	args := map[string]string{}
	var stages []stage
	var line string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if line == "" && (text == "" || strings.HasPrefix(text, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(text, `\`); ok {
			line += rest + " "
			continue
		}
		line += text
		keyword, rest, _ := strings.Cut(line, " ")
		in := instruction{keyword: strings.ToUpper(keyword), args: strings.TrimSpace(rest), line: line}
		line = ""
		switch {
		case in.keyword == "FROM":
			fields := strings.Fields(in.args)
			st := stage{}
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					st.name = fields[i+1]
					i++
				default:
					st.base = fields[i]
				}
			}
			stages = append(stages, st)
		case len(stages) == 0 && in.keyword == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case len(stages) > 0:
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
		}
	}
	return stages, args, sc.Err()
}

// copyArgs splits COPY [--from=STAGE] SRC DST.
func copyArgs(in instruction) (src, dst, from string, err error) {
	if in.keyword != "COPY" {
		return "", "", "", fmt.Errorf("not a COPY")
	}
	var paths []string
	for _, f := range strings.Fields(in.args) {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			from = v
			continue
		}
		if strings.HasPrefix(f, "--") {
			return "", "", "", fmt.Errorf("flag %s", f)
		}
		paths = append(paths, f)
	}
	if len(paths) != 2 {
		return "", "", "", fmt.Errorf("want one source and one destination")
	}
	return path.Clean(paths[0]), path.Clean(paths[1]), from, nil
}

// expand replaces ${NAME} or $NAME, the whole word, by the ARG's default.
func expand(word string, args map[string]string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(word, "$"), "{"), "}")
	if v, ok := args[name]; ok && strings.HasPrefix(word, "$") {
		return v
	}
	return word
}
