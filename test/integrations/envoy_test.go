package integrations

import (
	"errors"
	"fmt"

	// The Envoy types the pages configure, registered for typed_config.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

// newEnvoyMessage is an empty message of the registered type name.
func newEnvoyMessage(name string) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (import its package in envoy_test.go)", name, err)
	}
	return mt.New().Interface(), nil
}

// decodeAndValidate reads YAML into msg as Envoy reads its configuration
// (YAML as JSON, proto3 JSON names, no unknown field, typed_config
// resolved by its @type), then validates it and every typed_config in it.
func decodeAndValidate(text string, msg proto.Message) error {
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(js, msg); err != nil {
		return err
	}
	return validate(msg)
}

// validate runs msg's generated validation (which stops at an Any), then
// that of every Any's content, however deep.
func validate(msg proto.Message) error {
	var errs []error
	if v, ok := msg.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, err)
		}
	}
	walkAnys(msg.ProtoReflect(), func(a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.GetTypeUrl(), err))
			return
		}
		if err := validate(inner); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.GetTypeUrl(), err))
		}
	})
	return errors.Join(errs...)
}

// walkAnys calls f with every Any in m, not descending into them.
func walkAnys(m protoreflect.Message, f func(*anypb.Any)) {
	visit := func(v protoreflect.Message) {
		if a, ok := v.Interface().(*anypb.Any); ok {
			f(a)
			return
		}
		walkAnys(v, f)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				visit(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				visit(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			visit(v.Message())
		}
		return true
	})
}

// checkRateLimits decodes a MERGE value of a virtual host or route (no
// unknown field) and validates its rate_limits, the part the service
// depends on; the rest of a partial value lacks what a whole one needs.
func checkRateLimits(applyTo, value string) error {
	js, err := yaml.YAMLToJSON([]byte(value))
	if err != nil {
		return err
	}
	var limits []*routev3.RateLimit
	switch applyTo {
	case "VIRTUAL_HOST":
		vh := &routev3.VirtualHost{}
		if err := protojson.Unmarshal(js, vh); err != nil {
			return err
		}
		limits = vh.GetRateLimits()
	default:
		r := &routev3.Route{}
		if err := protojson.Unmarshal(js, r); err != nil {
			return err
		}
		limits = r.GetRoute().GetRateLimits()
	}
	if len(limits) == 0 {
		return errors.New("no rate_limits")
	}
	var errs []error
	for _, rl := range limits {
		errs = append(errs, validate(rl))
	}
	return errors.Join(errs...)
}
