"""GitHub's shared REST objects, whole: a user or organization ("Simple User"), a GitHub
App ("GitHub app", as a check run embeds it) and a repository ("Repository", as an
installation token lists it, and as a webhook payload carries it).

Every field GitHub's REST reference marks required is present (checked against GitHub's
OpenAPI description by tests/integration/test_simulator_openapi.py). Values are stable:
ids derive from the name (the crc32 of the lower-cased name), times
are one fixed instant, counts are zero, and API URLs point at the simulator (`base_url`)
while `html_url`s point at github.com, as the other simulated objects do.
"""

from __future__ import annotations

import zlib
from typing import Any

# When the simulated accounts, App and repositories were made: a fixed, past instant.
CREATED_AT = "2024-01-02T03:04:05Z"


def account_id(login: str) -> int:
    """A stable id for an account named `login` (GitHub's logins are case-insensitive)."""
    return zlib.crc32(login.lower().encode())


def simple_user(base_url: str, login: str, user_id: int, kind: str = "User") -> dict[str, Any]:
    """A "Simple User": an account as GitHub embeds it (`kind` User, Organization, Bot)."""
    api = f"{base_url}/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_sim{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
        "gravatar_id": "",
        "url": api,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": kind,
        "user_view_type": "public",
        "site_admin": False,
    }


def github_app(base_url: str, app: dict[str, Any]) -> dict[str, Any]:
    """A "GitHub app" from its short form (`check_runs.APP`): the owner made whole."""
    owner = app["owner"]
    return {
        **app,
        "owner": simple_user(base_url, owner["login"], owner["id"], owner["type"]),
    }


def repository(base_url: str, full_name: str, default_branch: str = "main") -> dict[str, Any]:
    """A public "Repository" with no history to speak of: no forks, stars or issues."""
    owner, name = full_name.split("/", 1)
    number = account_id(full_name)
    api = f"{base_url}/repos/{full_name}"
    html = f"https://github.com/{full_name}"
    templated = {  # GitHub's URL templates ({/sha}: RFC 6570), as it lists them
        "archive_url": "/{archive_format}{/ref}",
        "assignees_url": "/assignees{/user}",
        "blobs_url": "/git/blobs{/sha}",
        "branches_url": "/branches{/branch}",
        "collaborators_url": "/collaborators{/collaborator}",
        "comments_url": "/comments{/number}",
        "commits_url": "/commits{/sha}",
        "compare_url": "/compare/{base}...{head}",
        "contents_url": "/contents/{+path}",
        "contributors_url": "/contributors",
        "deployments_url": "/deployments",
        "downloads_url": "/downloads",
        "events_url": "/events",
        "forks_url": "/forks",
        "git_commits_url": "/git/commits{/sha}",
        "git_refs_url": "/git/refs{/sha}",
        "git_tags_url": "/git/tags{/sha}",
        "hooks_url": "/hooks",
        "issue_comment_url": "/issues/comments{/number}",
        "issue_events_url": "/issues/events{/number}",
        "issues_url": "/issues{/number}",
        "keys_url": "/keys{/key_id}",
        "labels_url": "/labels{/name}",
        "languages_url": "/languages",
        "merges_url": "/merges",
        "milestones_url": "/milestones{/number}",
        "notifications_url": "/notifications{?since,all,participating}",
        "pulls_url": "/pulls{/number}",
        "releases_url": "/releases{/id}",
        "stargazers_url": "/stargazers",
        "statuses_url": "/statuses/{sha}",
        "subscribers_url": "/subscribers",
        "subscription_url": "/subscription",
        "tags_url": "/tags",
        "teams_url": "/teams",
        "trees_url": "/git/trees{/sha}",
    }
    return {
        "id": number,
        "node_id": f"R_sim{number}",
        "name": name,
        "full_name": full_name,
        "owner": simple_user(base_url, owner, account_id(owner), "Organization"),
        "private": False,
        "visibility": "public",
        "html_url": html,
        "description": None,
        "fork": False,
        "url": api,
        **{field: api + suffix for field, suffix in templated.items()},
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git",
        "clone_url": f"{html}.git",
        "svn_url": html,
        "mirror_url": None,
        "homepage": None,
        "language": None,
        "license": None,
        "topics": [],
        "default_branch": default_branch,
        "is_template": False,
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "size": 0,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "open_issues": 0,
        "open_issues_count": 0,
        "pushed_at": CREATED_AT,
        "created_at": CREATED_AT,
        "updated_at": CREATED_AT,
    }
