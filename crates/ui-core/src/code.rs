//! Stable codes: every failure, diagnostic, host reason and wire error has one string that
//! never changes. Each family is one enum; [`as_str`](Code::as_str) gives the string, and the
//! serde form is that string.

use std::fmt;

macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[doc = $doc:literal])* $variant:ident = $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl $name {
            /// Every code of this family, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The stable string of this code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )*
                }
            }

            /// The code whose stable string is `text`.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $( $text => Some($name::$variant), )*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "enum": [$($text),*],
                })
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format_args!(
                        concat!("unknown ", stringify!($name), " `{}`"),
                        text
                    ))
                })
            }
        }
    };
}

string_enum! {
    /// Diagnostic and failure codes of the block language (`language.md` §21).
    pub enum Code {
        /// Expected `=` after a prop name or `>` in a closing tag; any internal error.
        InvalidSyntax = "invalid_syntax",
        /// `<` or `</` not followed by a tag name.
        InvalidTag = "invalid_tag",
        /// A prop name expected but not found, or an unquoted, unbraced prop value.
        InvalidProp = "invalid_prop",
        /// A prop written twice.
        DuplicateProp = "duplicate_prop",
        /// A tag left open.
        UnclosedTag = "unclosed_tag",
        /// A closing tag with no open tag of that name.
        UnmatchedTag = "unmatched_tag",
        /// `$` at declaration position not followed by `name =`.
        InvalidDeclaration = "invalid_declaration",
        /// A name declared twice.
        DuplicateDeclaration = "duplicate_declaration",
        /// A lexing or grammar error in an expression.
        InvalidExpression = "invalid_expression",
        /// An unclosed `{` or string at the end of a final block.
        IncompleteExpression = "incomplete_expression",
        /// An unknown `@Helper`.
        RefusedCall = "refused_call",
        /// A forbidden key, or an unknown field or variable.
        RefusedAccess = "refused_access",
        /// An operand or value of the wrong type, or a non-finite result.
        InvalidValue = "invalid_value",
        /// `@Query` evaluated as a value.
        QueryOnly = "query_only",
        /// `@Set`/`@Reset` evaluated as a value.
        ActionOnly = "action_only",
        /// A declaration value that is not a constant.
        InvalidDefault = "invalid_default",
        /// A malformed `@Query` or arguments the host schema rejects.
        InvalidQuery = "invalid_query",
        /// A query source the host has not registered.
        UnknownQuery = "unknown_query",
        /// A tag that is not in the catalog.
        UnknownComponent = "unknown_component",
        /// A component outside its required parent.
        InvalidParent = "invalid_parent",
        /// A component not allowed in its container.
        InvalidChild = "invalid_child",
        /// A prop the component does not declare (dropped).
        RefusedProp = "refused_prop",
        /// Props that fail the component schema; a Button without action.
        InvalidProps = "invalid_props",
        /// An action that is not a valid `@Set`/`@Reset`.
        RefusedAction = "refused_action",
        /// An action target or binding that is not local state.
        RefusedBinding = "refused_binding",
        /// A query reading for a query the block does not declare (any more).
        RefusedQuery = "refused_query",
        /// A block of another catalog version.
        UnknownCatalog = "unknown_catalog",
        /// A budget or limit was exceeded.
        BudgetExceeded = "budget_exceeded",
        /// A limit override that is not a positive safe integer.
        InvalidLimits = "invalid_limits",
        /// A choice that cannot be sent.
        RefusedChoice = "refused_choice",
        /// A block that is incomplete or of another catalog version.
        InvalidBlock = "invalid_block",
    }
}

string_enum! {
    /// Reason codes a host gives for a refused or failed reading or a plain link
    /// (`host.md` §14.1 and §14.2).
    pub enum HostCode {
        /// The block changed, is incomplete, streams, is a subagent's, or is gone.
        BlockStale = "block-stale",
        /// The stored block does not declare the query, or declares more than 8.
        QueryUndeclared = "query-undeclared",
        /// The declared source is not registered.
        SourceUnregistered = "source-unregistered",
        /// The writing chat's captured access is missing.
        AccessUnavailable = "access-unavailable",
        /// The same query was attempted too recently without a usable cache entry.
        RefreshLimit = "refresh-limit",
        /// All read slots of the chat or the host are taken.
        Busy = "busy",
        /// The source did not settle in time and was aborted.
        TimedOut = "timed-out",
        /// The validated result is over the size limit.
        ResultTooLarge = "result-too-large",
        /// The first readings did not fit the frozen snapshot.
        SnapshotTooLarge = "snapshot-too-large",
        /// A choice or link named a read id the backend does not hold.
        StaleRead = "stale-read",
        /// The host registered no link resolver.
        LinksUnsupported = "links-unsupported",
        /// The node is not a visible link target of the stored block.
        LinkUnsupported = "link-unsupported",
        /// A frozen link was dropped for size and must be checked again.
        LinkUnchecked = "link-unchecked",
        /// The page could not reach the backend (client only).
        Unreadable = "unreadable",
        /// The source or target lies outside the writer's project.
        OutsideProject = "outside-project",
        /// The file, commit, diff or node a link names is gone.
        TargetUnavailable = "target-unavailable",
        /// A name matches nothing or more than one thing.
        NoUniqueMatch = "no-unique-match",
    }
}

string_enum! {
    /// Error codes on the wire between page and host (`host.md` §14.3).
    pub enum WireCode {
        /// The payload has the wrong shape.
        BadRequest = "bad-request",
        /// The chat does not exist or is not the caller's.
        ChatNotFound = "chat-not-found",
        /// A read or choice was refused (access, source, declaration, host).
        RefusedQuery = "refused-query",
        /// The block changed since the page drew it.
        StaleUiBlock = "stale-ui-block",
        /// A query value the choice relied on is no longer held.
        StaleUiQuery = "stale-ui-query",
        /// The block's one choice was already sent.
        UiAlreadyAnswered = "ui-already-answered",
        /// The choice cannot be sent.
        RefusedChoice = "refused-choice",
        /// An uncoded failure escaped a handler.
        Internal = "internal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_their_strings() {
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(*code));
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), *code);
        }
        for code in HostCode::ALL {
            assert_eq!(HostCode::parse(code.as_str()), Some(*code));
        }
        for code in WireCode::ALL {
            assert_eq!(WireCode::parse(code.as_str()), Some(*code));
        }
        assert_eq!(Code::ALL.len(), 31);
        assert_eq!(HostCode::ALL.len(), 17);
        assert!(Code::parse("Budget_exceeded").is_none());
        assert!(serde_json::from_str::<Code>("\"nope\"").is_err());
    }

    #[test]
    fn fixed_strings() {
        assert_eq!(Code::BudgetExceeded.as_str(), "budget_exceeded");
        assert_eq!(Code::RefusedAccess.to_string(), "refused_access");
        assert_eq!(HostCode::TimedOut.as_str(), "timed-out");
        assert_eq!(WireCode::StaleUiBlock.as_str(), "stale-ui-block");
    }
}
