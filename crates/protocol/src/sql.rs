//! PostgreSQL column types for the protocol's ids, epochs and named enums, for the server's
//! rows (the `sqlx` feature; nothing else in this crate touches sqlx). Ids are `uuid`
//! columns, [`Epoch`] an `int8`, and the enums and [`RunnerRef`] `text` holding their wire
//! names, so a row reads as typed values and never as strings compared by hand.

use crate::agents::{
    AgentMode, Announce, AuthFailure, PrincipalKind, ToolSyncFailure, UnavailableReason,
};
use crate::approval::{ApprovalPolicy, ApprovalState, AskReason};
use crate::connection_auth::{AuthKind, AuthState, CredentialHolder};
use crate::ids::*;
use crate::placement::SpecDigest;
use crate::reconcile::{CallKind, ResolutionOutcome};
use crate::runner::Epoch;
use crate::runner_ref::RunnerRef;
use crate::state::CallState;
use crate::tools::Risk;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueRef, Postgres};
use sqlx::{Decode, Encode, Type};
use uuid::Uuid;

/// Makes each newtype a column of its inner type `$inner`.
macro_rules! column_as_inner {
    ($inner:ty: $($name:ident),* $(,)?) => {$(
        impl Type<Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                <$inner as Type<Postgres>>::type_info()
            }
            fn compatible(ty: &PgTypeInfo) -> bool {
                <$inner as Type<Postgres>>::compatible(ty)
            }
        }

        impl PgHasArrayType for $name {
            fn array_type_info() -> PgTypeInfo {
                <$inner as PgHasArrayType>::array_type_info()
            }
        }

        impl Encode<'_, Postgres> for $name {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <$inner as Encode<Postgres>>::encode_by_ref(&self.0, buf)
            }
        }

        impl<'r> Decode<'r, Postgres> for $name {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                <$inner as Decode<Postgres>>::decode(value).map($name)
            }
        }
    )*};
}

column_as_inner!(Uuid: UserId, WorkspaceId, EnvironmentId, ConnectorId, ConnectionId, ProfileId,
    CallId, RequestId, DeviceId, OperationId, EvidenceId, ObservationId, TokenId);
column_as_inner!(i64: Epoch);
column_as_inner!(String: SpecDigest);

/// Makes each type a `text` column holding its `Display` form, read back by its `FromStr`.
macro_rules! column_as_text {
    ($($name:ty),* $(,)?) => {$(
        impl Type<Postgres> for $name {
            fn type_info() -> PgTypeInfo {
                <&str as Type<Postgres>>::type_info()
            }
            fn compatible(ty: &PgTypeInfo) -> bool {
                <&str as Type<Postgres>>::compatible(ty)
            }
        }

        impl PgHasArrayType for $name {
            fn array_type_info() -> PgTypeInfo {
                <&str as PgHasArrayType>::array_type_info()
            }
        }

        impl Encode<'_, Postgres> for $name {
            fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
                <String as Encode<Postgres>>::encode(self.to_string(), buf)
            }
        }

        impl<'r> Decode<'r, Postgres> for $name {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(<&str as Decode<Postgres>>::decode(value)?.parse()?)
            }
        }
    )*};
}

column_as_text!(
    CallState,
    CallKind,
    ResolutionOutcome,
    RunnerRef,
    ApprovalPolicy,
    ApprovalState,
    AskReason,
    Risk,
    PrincipalKind,
    AgentMode,
    AuthFailure,
    ToolSyncFailure,
    Announce,
    UnavailableReason,
    AuthKind,
    AuthState,
    CredentialHolder
);
