package compat

func compareObject(c *ctx, on, un *node) {
	o, u := on.obj, un.obj
	compareRequired(c, o, u)
	compareProperties(c, o, u)
	comparePatterns(c, o, u)
	compareDependencies(c, o, u)
	compareAdditional(c, "additionalProperties", "ADDITIONAL_PROPERTIES",
		o.noAdditional, o.additional, u.noAdditional, u.additional,
		on.src.get("additionalProperties"), un.src.get("additionalProperties"))
	compareUnevaluated(c, "unevaluatedProperties", "UNEVALUATED_PROPERTIES", o.unevaluated, u.unevaluated)
	compareBound(c, "maxProperties", o.maxProps, u.maxProps)
	compareBound(c, "minProperties", o.minProps, u.minProps)
}

// required is the name of a required property as a value, or nil.
func required(o *objectKw, name string) *value {
	if !o.required[name] {
		return nil
	}
	return &value{kind: jString, s: name}
}

// hasDefault reports whether a property's schema, as written, has a default.
func hasDefault(n *node) bool { return n.src.get("default") != nil }

// compareRequired compares which properties are required. Confluent looks
// only at properties declared in both schemas (properties added or removed
// are judged in compareProperties); this checker also judges names required
// without being declared, which Confluent lets pass although every document
// without the name, valid before, is refused after (see the package doc).
func compareRequired(c *ctx, o, u *objectKw) {
	c.enter("required")
	defer c.leave()
	for _, name := range o.props {
		us := u.prop[name]
		if us == nil {
			continue
		}
		switch or, ur := o.required[name], u.required[name]; {
		case or && !ur:
			c.addAt(escapeToken(name), ruleRequiredAttributeRemoved, required(o, name), nil)
		case !or && ur && hasDefault(us):
			c.addAt(escapeToken(name), ruleRequiredAttributeWithDefaultAdded, nil, required(u, name))
		case !or && ur:
			c.addAt(escapeToken(name), ruleRequiredAttributeAdded, nil, required(u, name))
		}
	}
	for _, name := range u.requiredOrder {
		if u.prop[name] == nil && !o.required[name] {
			c.addAt(escapeToken(name), ruleRequiredAttributeAdded, nil, required(u, name))
		}
	}
	for _, name := range o.requiredOrder {
		if o.prop[name] == nil && u.prop[name] == nil && !u.required[name] {
			c.addAt(escapeToken(name), ruleRequiredAttributeRemoved, required(o, name), nil)
		}
	}
}

func compareProperties(c *ctx, o, u *objectKw) {
	c.enter("properties")
	defer c.leave()
	names := append([]string(nil), o.props...)
	for _, n := range u.props {
		if o.prop[n] == nil {
			names = append(names, n)
		}
	}
	for _, name := range names {
		c.enter(escapeToken(name))
		os, us := o.prop[name], u.prop[name]
		switch {
		case us == nil:
			propertyRemoved(c, os, u, name)
		case os == nil:
			propertyAdded(c, o, us, u, name)
		default:
			compare(c, os, us)
		}
		c.leave()
	}
}

// comparePatterns compares the schemas of the patternProperties both
// versions declare, as properties are. Confluent looks at patternProperties
// only as cover for properties added or removed, and so accepts any change
// to what a pattern allows (see the package doc). A pattern added or removed
// is not compared, as in Confluent.
func comparePatterns(c *ctx, o, u *objectKw) {
	c.enter("patternProperties")
	defer c.leave()
	for _, op := range o.patterns {
		for _, up := range u.patterns {
			if op.pattern == up.pattern {
				c.enter(escapeToken(op.pattern))
				compare(c, op.schema, up.schema)
				c.leave()
			}
		}
	}
}

// propertyRemoved judges a property the update no longer declares, by the
// update's content model: where it is open, the property may be anything,
// which accepts what it was; where partially open, what the model allows
// the name must accept what it was.
func propertyRemoved(c *ctx, os *node, u *objectKw, name string) {
	switch p := u.partial(name); {
	case u.openFor(name):
		c.add(rulePropertyRemovedFromOpen, os.src, nil)
	case p != nil:
		sc := c.sub()
		compare(sc, os, p)
		c.addAll(sc.diffs)
		if sc.compatible() {
			c.add(rulePropertyRemovedCovered, os.src, p.src)
		} else {
			c.add(rulePropertyRemovedNotCovered, os.src, p.src)
		}
	case os.isFalse():
		c.add(rulePropertyWithFalseRemovedFromClosed, os.src, nil)
	default:
		c.add(rulePropertyRemovedFromClosed, os.src, nil)
	}
}

// propertyAdded judges a property the original did not declare, by the
// original's content model: where it was open, the name could hold anything,
// which the new schema must still accept (STRICT: only an empty schema
// does); where closed, no document had it; where partially open, what the
// model allowed must be accepted.
func propertyAdded(c *ctx, o *objectKw, us *node, u *objectKw, name string) {
	req := u.required[name]
	if o.openFor(name) {
		switch {
		case us.isEmpty():
			c.add(rulePropertyWithEmptySchemaAddedToOpen, nil, us.src)
		case req && hasDefault(us):
			c.add(ruleRequiredPropertyWithDefaultAddedToOpen, nil, us.src)
		case req:
			c.add(ruleRequiredPropertyAddedToOpen, nil, us.src)
		default:
			c.add(ruleOptionalPropertyAddedToOpen, nil, us.src)
		}
		return
	}
	if p := o.partial(name); p != nil {
		sc := c.sub()
		compare(sc, p, us)
		c.addAll(sc.diffs)
		if sc.compatible() {
			c.add(rulePropertyAddedCovered, p.src, us.src)
		} else {
			c.add(rulePropertyAddedNotCovered, p.src, us.src)
		}
	}
	switch {
	case req && hasDefault(us):
		c.add(ruleRequiredPropertyWithDefaultToUnopen, nil, us.src)
	case req:
		c.add(ruleRequiredPropertyAddedToUnopen, nil, us.src)
	default:
		c.add(ruleOptionalPropertyAddedToUnopen, nil, us.src)
	}
}

// openFor reports whether the content model is open for an undeclared name:
// the name may appear, as anything. Confluent counts any patternProperties
// as closing the model; a name no pattern matches is as free as in an open
// model, so it is judged as one (see the package doc).
func (o *objectKw) openFor(name string) bool {
	if o.noAdditional || o.additional != nil || (o.unevaluated != nil && !o.unevaluated.isEmpty()) {
		return false
	}
	for _, p := range o.patterns {
		if p.re.MatchString(name) {
			return false
		}
	}
	return true
}

// partial is the schema a partially open content model gives an undeclared
// property name: the first matching patternProperties, else
// additionalProperties, else unevaluatedProperties; nil if none.
func (o *objectKw) partial(name string) *node {
	for _, p := range o.patterns {
		if p.re.MatchString(name) {
			return p.schema
		}
	}
	if o.additional != nil {
		return o.additional
	}
	if u := o.unevaluated; !o.noAdditional && u != nil && !u.isFalse() && !u.isEmpty() {
		return u
	}
	return nil
}

func compareDependencies(c *ctx, o, u *objectKw) {
	c.enter(o.propDepsKw)
	for _, name := range depNames(o.propDeps, u.propDeps) {
		od, ud := findPropDep(o.propDeps, name), findPropDep(u.propDeps, name)
		c.enter(escapeToken(name))
		switch {
		case ud == nil:
			c.add(ruleDependencyArrayRemoved, od.src, nil)
		case od == nil:
			c.add(ruleDependencyArrayAdded, nil, ud.src)
		case subset(od.names, ud.names) && subset(ud.names, od.names):
		case subset(od.names, ud.names):
			c.add(ruleDependencyArrayExtended, od.src, ud.src)
		case subset(ud.names, od.names):
			c.add(ruleDependencyArrayNarrowed, od.src, ud.src)
		default:
			c.add(ruleDependencyArrayChanged, od.src, ud.src)
		}
		c.leave()
	}
	c.leave()
	c.enter(o.schemaDepsKw)
	defer c.leave()
	for _, name := range schemaDepNames(o.schemaDeps, u.schemaDeps) {
		od, ud := findSchemaDep(o.schemaDeps, name), findSchemaDep(u.schemaDeps, name)
		c.enter(escapeToken(name))
		switch {
		case ud == nil:
			c.add(ruleDependencySchemaRemoved, od.src, nil)
		case od == nil:
			c.add(ruleDependencySchemaAdded, nil, ud.src)
		default:
			compare(c, od, ud)
		}
		c.leave()
	}
}
