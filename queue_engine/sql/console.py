"""What the console's own plumbing sends: the check behind every websocket message."""

# One row while the session is unexpired and its user exists and is active: the
# session's data (whose user and password hash it holds), the user's password hash,
# and whether the user holds the permission (as ModelBackend.has_perm decides it).
SESSION_STANDING = """
SELECT s.session_data, u.password,
       u.is_superuser OR EXISTS (
           SELECT 1
           FROM auth_permission p
           JOIN django_content_type ct ON ct.id = p.content_type_id
           WHERE ct.app_label = %(app_label)s AND p.codename = %(codename)s
             AND (p.id IN (SELECT up.permission_id FROM auth_user_user_permissions up
                           WHERE up.user_id = u.id)
                  OR p.id IN (SELECT gp.permission_id FROM auth_group_permissions gp
                              JOIN auth_user_groups ug ON ug.group_id = gp.group_id
                              WHERE ug.user_id = u.id))
       ) AS may_view
FROM django_session s
JOIN auth_user u ON u.id = %(user_id)s AND u.is_active
WHERE s.session_key = %(session_key)s AND s.expire_date > now()
"""
