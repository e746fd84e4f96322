package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/xconsumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/xreceiver"
)

// typeStr is the component type, as the reference receiver names it.
var typeStr = component.MustNewType("profiling")

// NewFactory returns the factory of the "profiling" receiver.
func NewFactory() receiver.Factory {
	return xreceiver.NewFactory(
		typeStr,
		func() component.Config { return createDefaultConfig() },
		xreceiver.WithProfiles(createProfiles, component.StabilityLevelAlpha),
	)
}

func createProfiles(
	_ context.Context,
	set receiver.Settings,
	cfg component.Config,
	next xconsumer.Profiles,
) (xreceiver.Profiles, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errors.New("profiling receiver: configuration is not a *profilingreceiver.Config")
	}
	return newReceiver(c, set, next, startNativeAgent)
}
