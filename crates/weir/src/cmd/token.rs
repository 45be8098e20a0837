//! `weir token create|list|revoke`: manage API tokens (global admins only).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use reqwest::Method;
use weir_api::{CreateToken, Grant, Role, TokenCreated, TokenList};

use super::client::Connection;
use crate::emit;

#[derive(Debug, Args)]
#[command(
    about = "Create, list and revoke API tokens",
    long_about = "Create, list and revoke API tokens (needs a global admin token). A token carries \
grants: a role (viewer reads; submitter also submits and kills; admin also manages) on a project \
(a grant on `ads` covers `ads.ranking`), or on `*` for every project. The secret is printed once; \
the server keeps only its SHA-256.\n\nA token submits as one scheduler user (what per-user running-app limits count; --user, \
default the token's id); a workflow's `user` field may name another only if the token may act as it \
(--act-as, repeatable; `*` for any, for a service account submitting for others).\n\nExamples:\n  \
weir token create ci-ads --grant ads:submitter --user ci-ads\n  \
weir token create airflow --grant '*:submitter' --act-as '*'\n  weir token create auditor --grant '*:viewer'\n  \
weir token list\n  weir token revoke t1a2b3c4d5e6f"
)]
pub struct TokenArgs {
    #[command(subcommand)]
    what: TokenCommand,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a token and print its secret (once).
    Create {
        name: String,
        /// PROJECT:ROLE, repeatable; ROLE is viewer, submitter or admin; PROJECT may be `*`.
        #[arg(long = "grant", value_name = "PROJECT:ROLE", required = true)]
        grants: Vec<String>,
        /// The scheduler user its runs count against (default: the token's id).
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// Another user its submissions may name (repeatable); `*` for any.
        #[arg(long = "act-as", value_name = "USER")]
        act_as: Vec<String>,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by id.
    Revoke { id: String },
}

fn grant(text: &str) -> Result<Grant> {
    let (project, role) =
        text.rsplit_once(':').with_context(|| format!("--grant `{text}` is not PROJECT:ROLE"))?;
    let role = match role {
        "viewer" => Role::Viewer,
        "submitter" => Role::Submitter,
        "admin" => Role::Admin,
        other => bail!("--grant `{text}`: `{other}` is not a role (viewer, submitter, admin)"),
    };
    if project.is_empty() {
        bail!("--grant `{text}`: name a project, or `*` for all");
    }
    Ok(Grant { project: project.to_string(), role })
}

pub fn run(args: &TokenArgs) -> Result<()> {
    let client = args.conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match &args.what {
            TokenCommand::Create { name, grants, user, act_as } => {
                let grants = grants.iter().map(|g| grant(g)).collect::<Result<Vec<_>>>()?;
                let body =
                    CreateToken { name: name.clone(), grants, user: user.clone(), act_as: act_as.clone() };
                let t: TokenCreated =
                    client.send(client.request(Method::POST, "/v1/tokens").json(&body)).await?;
                emit(&format!("{}\n", t.token))?;
                eprintln!("token {} ({}) created; the secret above is shown only once", t.id, t.name);
                Ok(())
            }
            TokenCommand::List => {
                let list: TokenList = client.send(client.request(Method::GET, "/v1/tokens")).await?;
                let mut out = String::new();
                for t in list.tokens {
                    let grants: Vec<String> = t
                        .grants
                        .iter()
                        .map(|g| format!("{}:{}", g.project, format!("{:?}", g.role).to_lowercase()))
                        .collect();
                    let state = if t.revoked_ms.is_some() { "revoked" } else { "active" };
                    out.push_str(&format!(
                        "{:<16} {:<8} {:<30} user {:<16} {}\n",
                        t.id,
                        state,
                        crate::cmd::safe(&t.name),
                        crate::cmd::safe(&t.user),
                        grants.join(",")
                    ));
                }
                emit(&out)
            }
            TokenCommand::Revoke { id } => {
                client.checked(client.request(Method::DELETE, &format!("/v1/tokens/{id}"))).await?;
                emit(&format!("token {id} revoked\n"))
            }
        }
    })
}
